package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// smallSendBuffers is a listener whose connections have a small kernel
// send buffer, so that a client that stops reading stops the server's
// writes after a few KiB, as a slow or stalled client does over a real
// network (loopback's autotuned buffers hold megabytes).
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// TestHTTPClientNotReadingAnswer: a client that sends a call on the fast
// path and takes none of its large answer (640 KiB) is given up once a
// write to it makes no progress for the answer timeout: its connection is
// closed, saying so, and the handler and the answer's memory are let go.
// The answer was written without a deadline: the handler waited for the
// client for ever, holding the answer (up to 16 MiB a call) and, for a
// resumable stream, its lock. Both kinds of answer: one JSON response
// (2025-06-18) and a resumable event stream (2025-11-25).
func TestHTTPClientNotReadingAnswer(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			down := newStreamServer(t)
			l := newTestLog(t)
			logs := &proctest.Buffer{}
			p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: down.url}}, func(o *Options) {
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			p.writeTimeout = 300 * time.Millisecond
			srv := httptest.NewUnstartedServer(Front(p.HTTPHandler(staticTokens(func(tok string) (string, bool) {
				return testActor, tok == testToken
			})), FrontOptions{}))
			srv.Listener = smallSendBuffers{srv.Listener}
			srv.Start()
			t.Cleanup(srv.Close)
			sid := fastSession(t, p, connectHTTP(t, srv.URL+"/mcp", version, nil)).ID()

			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4 << 10)
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ev__big","arguments":{}}}`
			req := "POST /mcp HTTP/1.1\r\nHost: " + srv.Listener.Addr().String() + "\r\nContent-Type: application/json\r\n" +
				"Accept: application/json, text/event-stream\r\nMcp-Session-Id: " + sid + "\r\nMcp-Protocol-Version: " + version + "\r\n" +
				"Authorization: Bearer " + testToken + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), "took nothing of its call's answer"); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) { // for a hung front, not a bound
					t.Fatalf("a client taking nothing of its answer was never given up: %s", logs.String())
				}
			}
			// The connection was closed with the answer cut short.
			c.SetReadDeadline(time.Now().Add(time.Minute))
			got, err := io.ReadAll(c)
			if err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("reading what was written before the client was given up: %v", err)
			}
			if bytes.Contains(got, []byte(bigText)) {
				t.Errorf("the client given up got its whole answer (%d bytes)", len(got))
			}
			if p.fastCalls.Load() == 0 {
				t.Error("the call did not take the fast path")
			}
		})
	}
}

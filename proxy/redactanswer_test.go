package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAnswerRefusalScrubbed: a client's answer to an HTTP server's
// elicitation holds a redacted value (a member the redact list names);
// the server takes the POST of that answer and answers it with a
// malformed response whose bad header line quotes the value. The
// sidecar's warning that answering failed, which quotes that line, does
// not hold the value.
func TestAnswerRefusalScrubbed(t *testing.T) {
	const secret = "S3CRET-answer-41zq"
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// The answer never reaches the server: it stops waiting.
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "token?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"token": map[string]any{"type": "string"}}}})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}, IsError: err != nil}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	answered := make(chan struct{}, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"result"`)) && bytes.Contains(body, []byte(`"action"`)) {
			// The answer to the elicitation: a bad head quoting it.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			var a struct {
				Result struct{ Content map[string]any } `json:"result"`
			}
			json.Unmarshal(body, &a)
			buf.WriteString(fmt.Sprintf("HTTP/1.1 200 OK\r\nbad %v\r\n\r\n", a.Result.Content["token"]))
			buf.Flush()
			conn.Close()
			select {
			case answered <- struct{}{}:
			default:
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "as", URL: down.URL, Redact: []string{"token"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cp, sp := net.Pipe()
	ss, err := p.connectPipe(context.Background(), sp, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "answerer", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"token": secret}}, nil
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: cp, Writer: cp}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "as__ask"}); err != nil {
		t.Fatal(err)
	}
	<-answered
	if !strings.Contains(logs.String(), "answering a server's request failed") {
		t.Fatalf("no warning that answering failed: the test cannot tell it is scrubbed; the log: %s", logs.String())
	}
	if n := strings.Count(logs.String(), secret); n > 0 {
		t.Errorf("the sidecar's log holds the redacted answer %d times: %s", n, logs.String())
	}
	writtenNowhere(t, l, &logs, []string{secret})
}

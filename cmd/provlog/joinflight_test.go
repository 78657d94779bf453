package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestJoinedStdioOwedAnswers runs a stdio serve joined to a running HTTP
// sidecar whose server asks the client during each call (askServer's
// "ask": two elicitations), and sends it more calls at once than the
// bridge relays at once (maxJoinedRequests), then answers each
// elicitation as it comes. Every call must be answered: a result, or for
// a call the bridge could not relay yet, an error saying why. The bridge
// stopped reading at the call one past its limit, so the answers that
// would end the calls under way were never read, and no call ended.
func TestJoinedStdioOwedAnswers(t *testing.T) {
	s, _, _ := joinedAsking(t, "")
	const calls = maxJoinedRequests + 4
	var lines []string
	for i := range calls {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ap__ask","arguments":{"n":%d}}}`, 100+i, i))
	}
	s.send(strings.Join(lines, "\n"))
	answers, asked := map[string]string{}, 0
	for len(answers) < calls {
		b := s.next()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatalf("provlog wrote %.200q: %v", b, err)
		}
		switch {
		case m.Method == "elicitation/create":
			asked++
			s.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"token":"t"}}}`)
		case m.Method == "" && len(m.ID) > 0:
			answers[string(m.ID)] = b
		}
	}
	results, wrong := 0, 0
	for id, b := range answers {
		switch {
		case strings.Contains(b, `"result":`) && strings.Contains(b, "dev.provlog/receipt"):
			results++
		case !strings.Contains(b, `"error":`) || !strings.Contains(b, "under way"):
			if wrong++; wrong <= 3 {
				t.Errorf("call %s was answered %.300s", id, b)
			}
		}
	}
	if results < maxJoinedRequests {
		t.Errorf("%d of %d calls got their result (%d elicitations answered, %d calls answered otherwise), want at least %d", results, calls, asked, wrong, maxJoinedRequests)
	}
	s.end()
}

// TestJoinedStdinClosedMidCall runs a stdio serve joined to a running
// HTTP sidecar, makes a call whose server asks the client (askServer's
// "ask"), and closes its stdin without answering, as a client that quits
// does: the call is cut off, as the stdio front cuts its own when its
// stdin closes (TestPipeStopCutsCalls' answer), the client, still
// reading, is told so, the serve ends, and the sidecar records the call
// as cancelled by the client. The bridge waited for the call, which
// waited for an answer that can no longer come, until the server's
// timeout.
func TestJoinedStdinClosedMidCall(t *testing.T) {
	s, data, stop := joinedAsking(t, ", timeout: 10m")
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ap__ask","arguments":{}}}`)
	if b := s.next(); !strings.Contains(b, `"elicitation/create"`) {
		t.Fatalf("the call's server did not ask: %.300s", b)
	}
	s.closeStdin()
	b := s.next()
	var got struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(b), &got) != nil || string(got.ID) != "2" || got.Error == nil || !strings.HasPrefix(got.Error.Message, "cut off") {
		t.Errorf("after its stdin closed, the client got %.300s for its call under way", b)
	}
	s.end()
	stop()
	var said []string
	for _, e := range readAll(t, data) {
		if e["kind"] == "call.result" {
			text, _ := e["error"].(string)
			said = append(said, text)
		}
	}
	if len(said) == 0 || said[len(said)-1] != "cancelled by the client" {
		t.Errorf("the calls' results say %q; want the last cancelled by the client", said)
	}
}

// TestJoinedStdioCleanEnd runs a stdio serve joined to a running HTTP
// sidecar, makes a call and closes its stdin: the serve ends without an
// error on stderr. Ending its session ended its stream for the server's
// own messages, which the bridge took for a request's stream cut off
// without its answer, and logged an error telling the user to restart it
// once the sidecar runs again, at every clean end.
func TestJoinedStdioCleanEnd(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, stop := startServe(t, "--data", data)
	defer stop()
	s := startStdioSidecar(t, data)
	s.send(createTask("2", "one"))
	answered(t, s.next(), "2")
	s.end()
	if strings.Contains(s.stderr.String(), "level=ERROR") {
		t.Errorf("a joined serve that ended cleanly logged an error:\n%s", s.stderr.String())
	}
}

// TestStdioJoinsStartingSidecar starts a stdio serve while the data dir
// is held by a provlog that has not said where it serves (an HTTP
// sidecar still starting: its store open, its servers connecting), then
// has the HTTP sidecar come up there: the stdio serve joins it, and its
// client's initialize and call are answered. It used to tell its client
// at once, and for good, that the holder serves no HTTP API.
func TestStdioJoinsStartingSidecar(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	holder := mustOpenSidecar(t, &Config{Data: data, Actor: "local"})
	s := startStdioProc(t, data)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	// The serve found the data dir held once it says so, either way.
	for !strings.Contains(s.stderr.String(), "held") {
		time.Sleep(20 * time.Millisecond)
	}
	holder.close()
	_, stop := startServe(t, "--data", data)
	defer stop()
	if b := s.next(); !strings.HasPrefix(b, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("initialize was answered %.300s", b)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(createTask("2", "joined late"))
	answered(t, s.next(), "2")
	s.end()
}

// TestJoinedStdioClientClosesStdout is TestServeStdioClientClosesStdout
// of a stdio serve joined to a running HTTP sidecar: its client closes
// its end of the serve's stdout, then makes a call. The serve says on
// stderr, as the stdio front does, that its answers are lost from here
// on; the call is still made and recorded, and the serve exits cleanly
// once stdin closes. It went on without a word, every answer lost.
func TestJoinedStdioClientClosesStdout(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, stop := startServe(t, "--data", data)
	defer stop()
	cmd := exec.Command(cmdtest.Build(t, "provlog"), "serve", "--data", data)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("no answer to initialize: %v\n%s", err, stderr.String())
	}
	out.Close()
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+createTask("2", "answer lost")+"\n")
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "writing to the stdio client failed"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // for a hung serve, not a bound
			t.Fatalf("the serve did not say that writing to its client failed\n%s", stderr.String())
		}
	}
	stdin.Close()
	if err := <-done; err != nil {
		t.Errorf("provlog serve: %v\n%s", err, stderr.String())
	}
	stop()
	if out, code := runCmd(t, "tasks", "--data", data, "list"); code != 0 || !strings.Contains(out, "answer lost") {
		t.Errorf("the call whose answer was lost is not in the log: %d\n%s", code, out)
	}
}

// TestSidecarStopsWithJoinedClient stops an HTTP sidecar while a stdio
// serve joined to it is connected and idle (its stream for the server's
// own messages open): the sidecar stops cleanly (startServe's stop wants
// exit 0). Its shutdown waited for that stream, which never ends by
// itself, for its 10 s, then exited 1 ("context deadline exceeded"), so
// every restart of a sidecar Claude Desktop had joined looked failed.
func TestSidecarStopsWithJoinedClient(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, stop := startServe(t, "--data", data)
	s := startStdioSidecar(t, data)
	s.send(createTask("2", "before the stop"))
	answered(t, s.next(), "2")
	stop()
}

// joinedAsking starts a sidecar fronting askServer over HTTP as server
// "ap" (more: further members of its config entry, such as ", timeout:
// 10m"), and a stdio serve joined to it whose client offers elicitation,
// initialized; it returns that client's process, the data dir and the
// sidecar's stop (also run at the test's end).
func joinedAsking(t *testing.T, more string) (stdioSidecar, string, func()) {
	t.Helper()
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return askServer() }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeFile(t, filepath.Join(dir, "provlog.yaml"), fmt.Appendf(nil, "data: %s\nservers:\n  - {id: ap, url: %q, protocol: 2025-11-25%s}\n", data, down.URL, more))
	_, stop := startServe(t, "--config", cfg)
	s := startStdioProc(t, data)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.next()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s, data, stop
}

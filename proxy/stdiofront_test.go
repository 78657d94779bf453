package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// pipeClient is a client of the pipe front that writes and reads lines
// itself, so that a test sees the bytes the front writes.
type pipeClient struct {
	t  *testing.T
	c  net.Conn
	in *bufio.Reader
}

func newPipeClient(t *testing.T, p *Proxy) *pipeClient {
	t.Helper()
	pc := connectPipeClient(t, p)
	pc.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"pipe-test","version":"1"}}}`)
	pc.read()
	pc.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return pc
}

// connectPipeClient is a client of the pipe front that has sent nothing.
func connectPipeClient(t *testing.T, p *Proxy) *pipeClient {
	t.Helper()
	cp, sp := net.Pipe()
	ss, err := p.connectPipe(context.Background(), sp, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close(); ss.Close() })
	return &pipeClient{t: t, c: cp, in: bufio.NewReader(cp)}
}

func (pc *pipeClient) send(line string) {
	pc.t.Helper()
	pc.c.SetWriteDeadline(time.Now().Add(time.Minute)) // for a hung front, not a bound
	if _, err := pc.c.Write([]byte(line + "\n")); err != nil {
		pc.t.Fatal(err)
	}
}

// read returns the next line the front writes that is not a notification.
func (pc *pipeClient) read() []byte {
	pc.t.Helper()
	for {
		pc.c.SetReadDeadline(time.Now().Add(time.Minute))
		b, err := pc.in.ReadBytes('\n')
		if err != nil {
			pc.t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"method":"notifications/`)) {
			return b
		}
	}
}

// wireDownstream is a streamable HTTP server whose tools/call answer is
// result, written as it is, as one event as npm server-everything writes
// it: the SDK's server serves the rest.
func wireDownstream(t testing.TB, result string) string {
	return wireDownstreamOf(t, map[string]string{"tools/call": result})
}

// wireDownstreamOf is wireDownstream answering each method in results
// (tools/call, resources/read, prompts/get) with its result as it is. It
// offers the tool echo, the resource wire:///r and the prompt p.
func wireDownstreamOf(t testing.TB, results map[string]string) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "wire", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("answered by the wire handler")
	})
	srv.AddResource(&mcp.Resource{URI: "wire:///r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, errors.New("answered by the wire handler")
	})
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, errors.New("answered by the wire handler")
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") == "" {
			sdk.ServeHTTP(w, r)
			return
		}
		m := readIDMethod(r)
		result, ok := results[m.Method]
		if !ok {
			sdk.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":"+result+"}\n\n")
	}))
	t.Cleanup(down.Close)
	return down.URL
}

// TestPipeFrontVerbatim: a stdio client gets a tools/call's result as
// the server wrote it (members no SDK type holds, their order and
// spacing), with the receipt; the pipe front served it, and the log's
// call.result hashes those bytes. Through the SDK's server it got the
// SDK's re-encoding, without the unknown members.
func TestPipeFrontVerbatim(t *testing.T) {
	result := `{"zeta":1,"content":[{"type":"text","text":"hi","x-extra":{"b":2,"a":1}}],  "isError":false}`
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: wireDownstream(t, result)}}, nil)
	pc := newPipeClient(t, p)
	pc.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"x"}}}`)
	got := pc.read()
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(got, &resp); err != nil || string(resp.ID) != "7" {
		t.Fatalf("answer %s: %v", got, err)
	}
	head, rest, ok := bytes.Cut(resp.Result, []byte(`"},`))
	if !ok || !bytes.HasPrefix(head, []byte(`{"_meta":{"`+ReceiptKey+`":"`)) || string(rest) != result[1:] {
		t.Fatalf("result %s, want the receipt then %s", resp.Result, result[1:])
	}
	if n := p.pipeCalls.Load(); n != 1 {
		t.Errorf("the pipe front served %d calls, want 1", n)
	}
	var meta struct {
		Meta map[string]string `json:"_meta"`
	}
	json.Unmarshal(resp.Result, &meta)
	_, raw := l.checkReceipt(t, meta.Meta[ReceiptKey])
	canon, err := log.Canonicalize([]byte(result))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if !strings.Contains(string(raw), hex.EncodeToString(sum[:])) {
		t.Errorf("the receipt's entries (%s) do not hash the result as received (%x)", raw, sum)
	}
}

// TestPipeFrontCancel: a notifications/cancelled for a call the pipe
// front serves cancels it; the call is answered and recorded as
// cancelled, and the front takes the next call.
func TestPipeFrontCancel(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "f")}, nil)
	pc := newPipeClient(t, p)
	at := l.size(t)
	pc.send(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"f__hang","arguments":{}}}`)
	l.waitSize(t, at+1) // the call entry is in the log
	pc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h","reason":"test"}}`)
	got := pc.read()
	if !bytes.Contains(got, []byte(`"id":"h"`)) || !bytes.Contains(got, []byte(`"error"`)) {
		t.Fatalf("answer to the cancelled call: %s", got)
	}
	pc.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`)
	if got := pc.read(); !bytes.Contains(got, []byte(`"id":8,"result":{"_meta":{"`+ReceiptKey)) {
		t.Fatalf("answer to the next call: %s", got)
	}
	if n := p.pipeCalls.Load(); n != 2 {
		t.Errorf("the pipe front served %d calls, want 2", n)
	}
	if _, raw := l.callAt(t, at); !strings.Contains(string(raw), "cancelled by the client") {
		t.Errorf("the hung call's entries: %s", raw)
	}
}

// TestPipeFrontRefusesUnsafeIDs: a numeric id the SDK would change (a
// fraction, beyond ±2^53) is refused on the pipe as over HTTP, and the
// session goes on. The SDK answered 1.5 as 1, and tools/list with
// 9007199254740993 as 9007199254740992.
func TestPipeFrontRefusesUnsafeIDs(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: wireDownstream(t, `{"content":[]}`)}}, nil)
	pc := newPipeClient(t, p)
	before := l.size(t)
	for _, id := range []string{"1.5", "9007199254740993", "-1e400"} {
		for _, msg := range []string{
			`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"e__echo","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`,
		} {
			pc.send(msg)
			if got := string(pc.read()); !strings.Contains(got, `"id":null`) || !strings.Contains(got, "the request id "+id+" is not a string or an integer") {
				t.Errorf("%s: %s", msg, got)
			}
		}
	}
	if l.size(t) != before {
		t.Error("a refused call was recorded")
	}
	pc.send(`{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`)
	if got := string(pc.read()); !strings.Contains(got, `"id":9007199254740992`) {
		t.Errorf("ping after the refusals: %s", got)
	}
}

// TestPipeStopCutsCalls: when the sidecar stops (the stdio front's
// context ends: SIGTERM or SIGINT) with a call under way, the call is
// answered and recorded as cut off by the stop, not as cancelled by its
// client.
func TestPipeStopCutsCalls(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	started := make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "s", URL: down.URL}}, nil)
	// The call is sent once the tool is routed, and the sidecar stopped
	// once the server has it: the log's growing was also the catalogue's
	// entry, and a stop before the front read the call left it unanswered.
	waitRouted(t, p, "s__slow")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.servePipe(ctx, inR, noClose{outW}) }()
	out := bufio.NewReader(outR)
	send := func(s string) { inW.Write([]byte(s + "\n")) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	out.ReadBytes('\n')
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"s__slow","arguments":{}}}`)
	select {
	case <-started:
	case <-time.After(time.Minute): // for a hung test, not a bound
		t.Fatal("the call never reached the server")
	}
	stop()
	answer, _ := out.ReadBytes('\n')
	if !strings.Contains(string(answer), `"id":2`) || !strings.Contains(string(answer), "cut off: provlog was stopping") {
		t.Errorf("the client got %s", answer)
	}
	<-served
	last := mustParse(t, l.entry(t, l.size(t)-1))
	res, err := log.ParseCallResult(last)
	if err != nil || res.Error != "cut off: provlog was stopping" {
		t.Errorf("the last entry, %s: %v %+v", last.Kind, err, res)
	}
}

// TestPipeFrontBadLines: a line from a stdio client that is not JSON is
// answered -32700 (Parse error), one that is JSON but no JSON-RPC message
// -32600 (Invalid Request), each naming what was wrong and quoting at
// most the line's start; nothing is recorded for them, and the session
// and its call under way go on. The SDK ended the session at the first
// of them, cutting off the call.
func TestPipeFrontBadLines(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "f")}, nil)
	pc := newPipeClient(t, p)
	at := l.size(t)
	release := filepath.Join(t.TempDir(), "release")
	pc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"f__wait_file","arguments":{"path":"` + release + `"}}}`)
	l.waitSize(t, at+1) // the call is under way
	long := strings.Repeat("x", 100<<10)
	for _, tc := range []struct{ line, id, code, says string }{
		{"hello", "null", "-32700", `the line is not JSON (invalid character 'h' looking for beginning of value, at byte 1): \"hello\"`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"f__ok"`, "null", "-32700", "the line ends inside a JSON value (a message cut short, or spread over lines)"},
		{`{"jsonrpc":"2.0","id":2,`, "null", "-32700", "the line ends inside a JSON value"},
		{"  {\"a\":}", "null", "-32700", "invalid character '}' looking for beginning of value, at byte 6"},
		{"42", "null", "-32600", "the line is JSON but not a JSON-RPC message"},
		{`"ping"`, "null", "-32600", "the line is JSON but not a JSON-RPC message"},
		{"[]", "null", "-32600", "the line is an empty batch, which is not a JSON-RPC message"},
		{`[{"jsonrpc":"2.0","id":4,"method":"ping"},1]`, "null", "-32600", "message 2 of the batch is not a JSON-RPC message"},
		{`{"jsonrpc":"1.0","id":3,"method":"ping"}`, "3", "-32600", `invalid message version tag \"1.0\"`},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, "null", "-32600", "invalid ID type"},
		{`{"jsonrpc":"2.0","id":"s","method":7}`, `"s"`, "-32600", "the line is not a JSON-RPC message"},
		{long, "null", "-32700", `: \"xxxx`},
	} {
		pc.send(tc.line)
		got := pc.read()
		var resp struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    json.Number `json:"code"`
				Message string      `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(got, &resp); err != nil || string(resp.ID) != tc.id || resp.Error.Code.String() != tc.code ||
			!strings.Contains(string(got), tc.says) || !strings.Contains(string(got), "send one JSON-RPC message per line") {
			t.Errorf("%.40s: answered %.300s, want id %s, code %s, saying %s", tc.line, got, tc.id, tc.code, tc.says)
		}
		if len(got) > 512 {
			t.Errorf("%.40s: an answer of %d bytes", tc.line, len(got))
		}
	}
	pc.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`)
	if got := pc.read(); !bytes.Contains(got, []byte(`"id":5,"result":{"_meta":{"`+ReceiptKey)) {
		t.Fatalf("the call after the bad lines: %s", got)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := pc.read(); !bytes.Contains(got, []byte(`"id":1,"result":{"_meta":{"`+ReceiptKey)) || !bytes.Contains(got, []byte("found "+release)) {
		t.Fatalf("the call under way across the bad lines: %s", got)
	}
	if grew := l.size(t) - at; grew != 4 {
		t.Errorf("the log grew by %d entries, want 4: two calls and their results", grew)
	}
}

// addStream gives the fixture (run with fixtureEnv "stream") a tool
// "stream" that sends progress notifications of 1 KiB, one after the
// other, until its call is cancelled (or n of them, then answers), and a
// tool "logs" that sends log messages so.
func addStream(s *mcp.Server, obj json.RawMessage) {
	s.AddTool(&mcp.Tool{Name: "logs", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		pad := strings.Repeat("l", 1<<10)
		for ctx.Err() == nil {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: pad}); err != nil {
				return nil, err
			}
		}
		return nil, ctx.Err()
	})
	s.AddTool(&mcp.Tool{Name: "stream", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ N int }
		json.Unmarshal(req.Params.Arguments, &args)
		pad := strings.Repeat("p", 1<<10)
		for i := 0; ctx.Err() == nil; i++ {
			if args.N > 0 && i == args.N {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "streamed"}}}, nil
			}
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: pad}); err != nil {
				return nil, err
			}
		}
		return nil, ctx.Err()
	})
}

// A stallWriter is a stdio client's stdout that takes what is written
// until the client stops reading (stop is closed), and then nothing: a
// write blocks, as on a full pipe, until the client reads again
// (release).
type stallWriter struct {
	w       io.WriteCloser
	stop    chan struct{}
	blocked chan struct{} // closed when a write first blocks
	once    sync.Once
	release chan struct{}
}

func newStallWriter(w io.WriteCloser) *stallWriter {
	return &stallWriter{w: w, stop: make(chan struct{}), blocked: make(chan struct{}), release: make(chan struct{})}
}

func (s *stallWriter) Write(b []byte) (int, error) {
	select {
	case <-s.stop:
		s.once.Do(func() { close(s.blocked) })
		<-s.release
		return s.w.Write(b)
	default:
		return s.w.Write(b)
	}
}

func (s *stallWriter) Close() error { return s.w.Close() }

// TestPipeStalledClient: a stdio client that stops reading its stdout
// while a stdio server streams it progress holds up only itself: a call
// to the same server through the HTTP front completes. The notifications
// were written to the client from the server's read loop, so the
// server's answers to everyone waited for the stalled client.
func TestPipeStalledClient(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "f", Command: fixtureServer(t), Env: map[string]string{fixtureEnv: "stream"}}}, nil)
	cs := connectHTTP(t, serveHTTP(t, p), "2025-11-25", nil)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := newStallWriter(outW)
	ss, err := p.connectPipe(context.Background(), inR, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(out.release); inW.Close(); ss.Close(); outR.Close() })
	lines := make(chan []byte, 64)
	go func() { // the client reads all it is given, until the stall
		in := bufio.NewReader(outR)
		for {
			b, err := in.ReadBytes('\n')
			if err != nil {
				return
			}
			select {
			case lines <- b:
			default:
			}
		}
	}()
	next := func(what string) []byte {
		select {
		case b := <-lines:
			return b
		case <-time.After(time.Minute): // for a hung front, not a bound
			t.Fatalf("no %s from the front", what)
		}
		return nil
	}
	inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stalling","version":"1"}}}` + "\n"))
	next("answer to initialize")
	inW.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"f__stream","arguments":{},"_meta":{"progressToken":"s"}}}` + "\n"))
	for !bytes.Contains(next("progress"), []byte(`"method":"notifications/progress"`)) {
	}
	close(out.stop)
	select {
	case <-out.blocked:
	case <-time.After(time.Minute):
		t.Fatal("the front wrote nothing more to the client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // for a hung server, not a bound
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__ok", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("a call through the HTTP front, while the stdio client is stalled: %v", err)
	}
	if got := textOf(res); got != "ok" {
		t.Errorf("the call through the HTTP front: %q", got)
	}
}

// TestLineWriterStalled: while its client does not read, a lineWriter
// takes every write at once: it queues answers, requests and
// notifications other than progress and log messages whatever it holds,
// and drops progress and log messages once it holds maxPipeQueue bytes,
// saying so, and how many, once the client reads again. What it wrote
// reaches the client in the order written.
func TestLineWriterStalled(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var logs bytes.Buffer
	out := newStallWriter(w)
	l := newLineWriter(out, slog.New(slog.NewTextHandler(&logs, nil)))
	progress := func(i int) string {
		return `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":` + strconv.Itoa(i) + `,"message":"` + strings.Repeat("p", 1<<10) + `"}}` + "\n"
	}
	close(out.stop)
	l.Write([]byte(progress(0)))
	<-out.blocked
	sent := []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}` + "\n",
	}
	for _, b := range sent {
		l.Write([]byte(b))
	}
	for i := 1; i <= 2000; i++ {
		l.Write([]byte(progress(i)))
	}
	l.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n"))
	late := []string{
		`{"jsonrpc":"2.0","id":3,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n",
	}
	for _, b := range late {
		l.Write([]byte(b))
	}
	if err := l.writeOwned([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	dropped := l.droppedTotal()
	if dropped < 1000 || dropped > 1100 {
		t.Errorf("dropped %d of 2000 progress notifications and a log message; want those past %d bytes", dropped, maxPipeQueue)
	}
	if !strings.Contains(logs.String(), "the stdio client is not reading its stdout") {
		t.Errorf("the drops were not logged: %s", logs.String())
	}
	close(out.release)
	lines := bufio.NewReader(r)
	read := func() string {
		b, err := lines.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var got []string
	for b := read(); !strings.Contains(b, `"id":2`); b = read() {
		got = append(got, b)
	}
	want := append([]string{progress(0)}, sent...)
	for i := 1; i <= 2001-dropped; i++ {
		want = append(want, progress(i))
	}
	want = append(want, late...)
	if len(got) != len(want) {
		t.Fatalf("the client read %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d: got %.80s, want %.80s", i, got[i], want[i])
		}
	}
	l.Write([]byte(progress(2001)))
	if got := read(); got != progress(2001) {
		t.Errorf("after the client read again: %.80s", got)
	}
	if want := fmt.Sprintf("the stdio client reads its stdout again\" notifications_dropped=%d", dropped); !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %s: %s", want, logs.String())
	}
}

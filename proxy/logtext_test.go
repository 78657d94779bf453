package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// addLeaks gives the fixture (run with fixtureEnv "leaks", in a directory
// of its own) what puts a call's argument into the proxy's log by ways
// other than its answer:
//   - "garble" notes its token in the file "kept" and writes a frame on
//     stdout whose version tag is the token, which ends the connection
//     with an error quoting it;
//   - "print" writes its text to stderr as it is (no newline added),
//     then exits if exit is true;
//   - the process started second refuses logging/setLevel, and those
//     started after it refuse to initialize, each quoting the kept token.
func addLeaks(s *mcp.Server) {
	f, _ := os.OpenFile("starts", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	fmt.Fprintln(f, os.Getpid())
	f.Close()
	starts, _ := os.ReadFile("starts")
	start := bytes.Count(starts, []byte("\n"))
	kept, _ := os.ReadFile("kept")
	obj := json.RawMessage(`{"type":"object"}`)
	type leakArgs struct {
		Token, Text string
		Exit        bool
	}
	args := func(req *mcp.CallToolRequest) (a leakArgs) {
		json.Unmarshal(req.Params.Arguments, &a)
		return a
	}
	s.AddTool(&mcp.Tool{Name: "garble", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a := args(req)
		os.WriteFile("kept", []byte(a.Token), 0o600)
		fmt.Printf("{\"jsonrpc\":%q,\"id\":1,\"result\":{}}\n", a.Token)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "garbled"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "print", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a := args(req)
		os.Stderr.WriteString(a.Text)
		if a.Exit {
			os.Exit(3)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "printed"}}}, nil
	})
	if len(kept) == 0 {
		return
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch {
			case start == 2 && method == "logging/setLevel":
				return nil, fmt.Errorf("no log level while %s is kept", kept)
			case start > 2 && method == "initialize":
				return nil, fmt.Errorf("no start while %s is kept", kept)
			}
			return next(ctx, method, req)
		}
	})
}

// leaksConfig is the fixture with addLeaks, its token redacted.
func leaksConfig(t *testing.T, id string) ServerConfig {
	cfg := fixtureServerConfig(t, id)
	cfg.Env[fixtureEnv], cfg.Dir, cfg.Redact = "leaks", t.TempDir(), []string{"token"}
	return cfg
}

// leaksProxy starts a proxy logging at debug level to the buffer it
// returns, with the server lk (leaksConfig), and returns print, which
// has lk print text on its stderr in a call that carries secret as its
// redacted token.
func leaksProxy(t *testing.T, secret string) (*Proxy, *proctest.Buffer, func(text string)) {
	buf := new(proctest.Buffer)
	p := startProxy(t, newTestLog(t), []ServerConfig{leaksConfig(t, "lk")}, func(o *Options) { o.Logger = debugLogger(buf) })
	cs := connectMemory(t, p, nil)
	return p, buf, func(text string) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lk__print", Arguments: map[string]any{"token": secret, "text": text}})
		if err != nil || res.IsError {
			t.Fatalf("print: %v %s", err, mustJSON(res))
		}
	}
}

// debugLogger logs to buf at debug level, where a stdio server's stderr
// goes.
func debugLogger(buf *proctest.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// checkLogScrubbed fails t if buf holds secret, or its base64, and if a
// line holding what is not holds no [redacted] where the secret was.
func checkLogScrubbed(t *testing.T, buf *proctest.Buffer, secret string, lines ...string) {
	t.Helper()
	for _, x := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))} {
		if got := linesWith(buf, x); len(got) > 0 {
			t.Errorf("the proxy's log holds a redacted value: %q", got)
		}
	}
	for _, what := range lines {
		got := linesWith(buf, what)
		if len(got) == 0 || !strings.Contains(got[0], Redacted) {
			t.Errorf("no line %q quoting the scrubbed value: %q", what, got)
		}
	}
}

// TestServerErrorsScrubbed: a stdio server that quotes an earlier call's
// redacted argument in what ends its connection (a frame whose version
// tag is the value), in its refusal of logging/setLevel, and in its
// refusal to initialize, does not get it into the proxy's log: the
// supervisor's "connection lost" and "failed to start" warnings and the
// refusal's debug line are scrubbed of the server's recent redacted
// values. Each was logged as the SDK worded it.
func TestServerErrorsScrubbed(t *testing.T) {
	const secret = "sk-Garbled/77+Qa"
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{leaksConfig(t, "lk")}, func(o *Options) { o.Logger = debugLogger(&buf) })
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	garble := &mcp.CallToolParams{Name: "lk__garble", Arguments: map[string]any{"token": secret}}
	if res, err := cs.CallTool(ctx, garble); err == nil && !res.IsError {
		t.Fatalf("a garbled frame answered the call: %s", mustJSON(res))
	}
	// The second process refuses logging/setLevel, and is up.
	d := p.live["lk"].d
	eventuallyTrue(t, "the server was restarted", func() bool {
		st := d.sup.status()
		return st.state == StateUp && st.restarts > 0
	})
	if res, err := cs.CallTool(ctx, garble); err == nil && !res.IsError {
		t.Fatalf("a garbled frame answered the call: %s", mustJSON(res))
	}
	eventuallyTrue(t, "the third process refused to start", func() bool { return len(linesWith(&buf, "failed to start")) > 0 })
	checkLogScrubbed(t, &buf, secret, "connection lost: ", "refused logging/setLevel", "failed to start")
}

// TestLostCallWarningScrubbed: an HTTP server whose answer to a call is
// a stream that carries an answer to another request, whose id is the
// call's redacted argument, and ends: the call's connection is lost, and
// the proxy's warning saying so (whose error quotes that id) is scrubbed
// of it. It was logged as the stream's reader worded it.
func TestLostCallWarningScrubbed(t *testing.T) {
	const secret = "sk-Strayed/52+Lu"
	srv := mcp.NewServer(&mcp.Implementation{Name: "strays", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "use", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Method string
			Params struct{ Arguments struct{ Token string } }
		}
		if json.Unmarshal(body, &req) != nil || req.Method != "tools/call" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%q,\"result\":{}}\n\n", req.Params.Arguments.Token)
	}))
	t.Cleanup(down.Close)
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "st", URL: down.URL, Redact: []string{"token"}}}, func(o *Options) { o.Logger = debugLogger(&buf) })
	cs := connectMemory(t, p, nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "st__use", Arguments: map[string]any{"token": secret}})
	if err == nil || !strings.Contains(err.Error(), "closed the connection during the call") {
		t.Fatalf("call: %v, want its connection lost", err)
	}
	checkLogScrubbed(t, &buf, secret, "connection lost during a call")
}

// TestEarlierSecretKeptOffDisk: a server that answers one call with what
// an earlier call had redacted (a login's token, shown back by whoami or
// quoted by a failing call) has it kept off disk as it is kept off the
// proxy's log: the retained result and the call.result's error text are
// scrubbed of the server's latest redacted values, not only the call's
// own. Each was scrubbed of its own call's alone, and kept the token.
func TestEarlierSecretKeptOffDisk(t *testing.T) {
	const secret = "sk-Remembered/31+Zo"
	var last string
	var mu sync.Mutex
	srv := mcp.NewServer(&mcp.Implementation{Name: "remembers", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Token string }
		json.Unmarshal(req.Params.Arguments, &args)
		mu.Lock()
		last = args.Token
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged in"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "whoami", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you logged in with " + last}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		return nil, &jsonrpc.Error{Code: -32001, Message: "token " + last + " has expired"}
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var buf proctest.Buffer
	cfg := ServerConfig{ID: "rm", URL: down.URL, Redact: []string{"token"}, Retain: RetainFull}
	p := startProxy(t, l, []ServerConfig{cfg}, func(o *Options) { o.Logger = debugLogger(&buf) })
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rm__login", Arguments: map[string]any{"token": secret}}); err != nil {
		t.Fatal(err)
	}
	before := l.size(t)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rm__whoami", Arguments: map[string]any{}})
	if err != nil || !strings.Contains(textOf(res), secret) {
		t.Fatalf("whoami: %v %s, want the token as the server sent it", err, mustJSON(res))
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rm__fail", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), secret) {
		t.Fatalf("fail: %v, want the server's error as it sent it", err)
	}
	res2, err := log.ParseCallResult(mustParse(t, l.entry(t, before+1)))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := l.blobs.Get(res2.RetainedBlob())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(kept, []byte(secret)) || !bytes.Contains(kept, []byte("you logged in with [redacted]")) {
		t.Errorf("whoami's result is kept as %s", kept)
	}
	for i := before; i < l.size(t); i++ {
		if b := l.entry(t, i); bytes.Contains(b, []byte(secret)) {
			t.Errorf("entry %d holds the token: %s", i, b)
		}
	}
	checkLogScrubbed(t, &buf, secret)
}

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// wireResults keeps the result member of each JSON-RPC response a
// downstream server sent, by the method of its request, as it went over
// the wire: what a read entry's hash must be taken of.
type wireResults struct {
	mu   sync.Mutex
	last map[string]json.RawMessage
}

func (w *wireResults) get(method string) json.RawMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[method]
}

// receiptCallResult is the call.result entry res's receipt names in l.
func receiptCallResult(t *testing.T, l *testLog, res *mcp.CallToolResult) *log.CallResultEntry {
	t.Helper()
	rc, err := log.ParseReceipt([]byte(metaReceipt(res.Meta)))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := log.ParseCallResult(mustParse(t, l.entry(t, rc.Index)))
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// serveWire serves srv over streamable HTTP (JSON answers) and returns
// its URL, and the results it sent, as they went over the wire.
func serveWire(t *testing.T, srv *mcp.Server) (url string, wire *wireResults) {
	wire = &wireResults{last: map[string]json.RawMessage{}}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	down := httptest.NewServer(wire.handler(h))
	t.Cleanup(down.Close)
	return down.URL, wire
}

// handler serves h, noting its JSON responses' results.
func (w *wireResults) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(rw, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Method string `json:"method"`
		}
		json.Unmarshal(body, &req)
		rec := &teeWriter{ResponseWriter: rw}
		h.ServeHTTP(rec, r)
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if req.Method != "" && json.Unmarshal(rec.body.Bytes(), &resp) == nil && resp.Result != nil {
			w.mu.Lock()
			w.last[req.Method] = resp.Result
			w.mu.Unlock()
		}
	})
}

type teeWriter struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (t *teeWriter) Write(b []byte) (int, error) {
	t.body.Write(b)
	return t.ResponseWriter.Write(b)
}

func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// oddReadServer is a go-sdk server over streamable HTTP (JSON responses)
// whose resource file:///odd, prompt "odd" and tool "odd" answer with a
// result that
// is not I-JSON (a lone surrogate in its _meta, which encoding/json passes
// on from a json.RawMessage), and whose file:///plain is an ordinary
// resource.
func oddReadServer(t *testing.T) (url string, wire *wireResults) {
	t.Helper()
	odd := mcp.Meta{"odd": json.RawMessage(`"\ud800"`)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, nil)
	for _, uri := range []string{"file:///odd", "file:///plain"} {
		srv.AddResource(&mcp.Resource{URI: uri, Name: strings.TrimPrefix(uri, "file:///")},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "text"}}}
				if req.Params.URI == "file:///odd" {
					res.Meta = odd
				}
				return res, nil
			})
	}
	srv.AddPrompt(&mcp.Prompt{Name: "odd"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Meta: odd, Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "odd", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Meta: odd, Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil
	})
	return serveWire(t, srv)
}

// TestReadResultForm: a resources/read or prompts/get result that is not
// I-JSON is hashed as received, and its entry says so
// (result_canonical: false) as a call.result does, so a verifier holding
// the result knows which bytes to hash; an ordinary read's entry hashes
// the JCS form and carries no marker. Before, both entries carried a bare
// result_sha256. A tool's call.result of the same result says the same.
func TestReadResultForm(t *testing.T) {
	url, wire := oddReadServer(t)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "odd", URL: url}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	// want returns the hash of the result the server last sent for
	// method, of its JCS form unless raw.
	want := func(name, method string, raw bool) (sum string, size int64) {
		t.Helper()
		got := wire.get(method)
		if got == nil {
			t.Fatalf("%s: the server sent no %s result", name, method)
		}
		canon, err := log.Canonicalize(got)
		if (err != nil) != raw {
			t.Fatalf("%s: the server's result %s: JCS error %v; the test needs it to be I-JSON: %v", name, got, err, !raw)
		}
		if raw {
			return hexSHA256(got), int64(len(got))
		}
		return hexSHA256(canon), int64(len(got))
	}
	check := func(name, method string, meta mcp.Meta, kind string, raw bool) {
		t.Helper()
		re := l.readReceipt(t, meta, kind)
		sum, size := want(name, method, raw)
		if re.ResultRaw != raw || re.ResultRemarshalled || re.ResultSHA256 != sum || re.ResultBytes != size {
			t.Errorf("%s: entry has ResultRaw %v, ResultRemarshalled %v, %s of %d bytes; want ResultRaw %v, %s of %d bytes",
				name, re.ResultRaw, re.ResultRemarshalled, re.ResultSHA256, re.ResultBytes, raw, sum, size)
		}
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "odd+file:///odd"})
	if err != nil {
		t.Fatal(err)
	}
	check("odd resource", "resources/read", rr.Meta, log.KindResourceRead, true)
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "odd__odd"})
	if err != nil {
		t.Fatal(err)
	}
	check("odd prompt", "prompts/get", gp.Meta, log.KindPromptGet, true)
	if rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "odd+file:///plain"}); err != nil {
		t.Fatal(err)
	}
	check("plain resource", "resources/read", rr.Meta, log.KindResourceRead, false)

	// The same result from a tool: its call.result says the same, as the
	// two kinds decide it in one place.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "odd__odd"})
	if err != nil || res.IsError {
		t.Fatalf("odd__odd: %v %v", err, res)
	}
	cr := receiptCallResult(t, l, res)
	if sum, size := want("odd tool", "tools/call", true); !cr.ResultRaw || cr.ResultRemarshalled || cr.ResultSHA256 != sum || cr.ResultBytes != size {
		t.Errorf("odd tool: call.result %+v; want ResultRaw, %s of %d bytes", cr, sum, size)
	}

	// Not expected (the wire bytes are always captured): a result known
	// only from the SDK's decoding is hashed in its re-encoding, and the
	// entry says so.
	e := log.ReadEntry{Kind: log.KindResourceRead, Time: time.Now(), Actor: "test-actor", Server: "odd", URI: "file:///plain"}
	read, err := p.recordRead(ctx, &e, nil, &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///plain", Text: "text"}}})
	if err != nil {
		t.Fatal(err)
	}
	if re, err := log.ParseRead(mustParse(t, l.entry(t, read.receipt.Index))); err != nil || !re.ResultRemarshalled || re.ResultRaw {
		t.Errorf("a read of a result not captured: %+v, %v; want result_remarshalled: true", re, err)
	}
}

// TestFitReadCountsResultForm: fitRead makes room for the markers a
// result may add (result_canonical, result_remarshalled) as it does for
// the result's hash and size. Prompt arguments that fit only without them
// go to a blob; left in the entry, a result that is not I-JSON would make
// the entry too large to write, after the read was forwarded.
func TestFitReadCountsResultForm(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, nil, nil)
	ctx := context.Background()
	// The worst a leg's entry can be, as fitRead's probe has it.
	worst := func(e log.ReadEntry, form bool) *log.ReadEntry {
		e.Time, e.ResultSHA256, e.ResultBytes = time.Now(), strings.Repeat("0", 64), math.MaxInt64
		e.Continues, e.InputResponsesSHA256 = math.MaxInt64, e.ResultSHA256
		e.ResultRaw, e.ResultRemarshalled = form, form
		return &e
	}
	entry := func(n int) log.ReadEntry {
		return log.ReadEntry{Kind: log.KindPromptGet, Actor: "test-actor", Server: "odd", Prompt: "odd",
			Args: log.CanonicalJSON(`{"a":"` + strings.Repeat("x", n) + `"}`)}
	}
	size := func(e *log.ReadEntry) int {
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	bare, marked := size(worst(entry(0), false)), size(worst(entry(0), true))
	// Arguments that fill the entry to midway between its size without
	// the markers and with them.
	e := entry(log.MaxEntrySize - (bare+marked)/2)
	if _, err := worst(e, false).Marshal(); err != nil {
		t.Fatalf("the arguments do not fit even without the markers: %v", err)
	}
	if _, err := worst(e, true).Marshal(); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Fatalf("the arguments fit with the markers too (%v): the test does not test", err)
	}
	if _, err := p.fitRead(ctx, &e); err != nil {
		t.Fatal(err)
	}
	if e.Args != nil || e.ArgsSHA256 == "" {
		t.Fatalf("fitRead left the arguments in an entry they fill only without the markers")
	}
	if _, err := worst(e, true).Marshal(); err != nil {
		t.Errorf("after fitRead, the entry with the markers: %v", err)
	}
}

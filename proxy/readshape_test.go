package proxy

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// readEach makes a resources/read of uri and a prompts/get of prompt
// through cs, and returns their errors and the entries each wrote.
func readEach(t *testing.T, l *testLog, cs *mcp.ClientSession, uri, prompt string) (errs [2]error, wrote [2][]string) {
	t.Helper()
	ctx := context.Background()
	for i, read := range []func() error{
		func() error { _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); return err },
		func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt}); return err },
	} {
		n := l.size(t)
		errs[i] = read()
		for j := n; j < l.size(t); j++ {
			wrote[i] = append(wrote[i], string(l.entry(t, j)))
		}
	}
	return errs, wrote
}

// checkReadRefused checks that a read whose result the client cannot be
// given failed with an error naming the server (server) and what was
// wrong (want), and that nothing was recorded for it (wrote).
func checkReadRefused(t *testing.T, kind, server string, err error, wrote []string, want string) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) || !strings.Contains(we.Message, `server "`+server+`"`) || !strings.Contains(we.Message, want) {
		t.Errorf("the %s got %v, want an error naming the server and saying %q", kind, err, want)
	}
	for _, e := range wrote {
		t.Errorf("the %s the client got no result of is recorded: %s", kind, e)
	}
}

// TestReadResultNotPassedOnNotRecorded: a server that answers a
// resources/read or a prompts/get with a result the client cannot be
// given gets the read failed with an error naming the server and what was
// wrong, and nothing is recorded, as for a read the server answered with
// an error: read entries have no is_error, and nothing was read. A result
// the SDK's decoding takes had a resource.read or prompt.get entry
// written, claiming the agent read what the client was told it could not
// have: null, a null _meta, and resource contents that are none or hold
// null (the SDK's front refused the one and the proxy's URI rewriting
// crashed on the other), and a result holding both what was read
// (contents, messages) and inputRequests, which go-sdk's front refuses
// ("server bug: result has both content and inputRequests"), on every
// way a read takes (a bridged leg's entry said the agent read what the
// client never got). An answer with no result (nor an error) is refused
// saying so; the client was told "EOF", as of a connection that ended.
// A result holding an input request that is null, on which go-sdk's
// decoding panics, is refused saying so; the client was told of an
// internal error, naming neither the server nor what was wrong.
// The others (an array, a _meta array, contents or messages that are no
// array) the SDK refuses before anything is recorded, and still does.
// Prompt messages that are none or hold null, which go-sdk's client takes
// and the TypeScript SDK's refuses (TestTypeScriptClientReadRefused), are
// refused as contents are.
func TestReadResultNotPassedOnNotRecorded(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	// The raw server speaks 2025-11-25: a 2026-07-28 client's read is
	// parked (parkread.go), an older client's is not.
	for front, cs := range map[string]*mcp.ClientSession{
		"older":  connectMemory(t, p, nil),
		"parked": connectHTTP(t, serveHTTP(t, p), "", nil),
	} {
		t.Run(front, func(t *testing.T) { readsNotPassedOn(t, l, cs) })
	}
}

// What the client is told of a read whose result it cannot be given, and
// of one answered with no result at all; and what is wrong with a result
// holding an input request that is null, on which go-sdk's decoding
// panics (the client was told "provlog: internal error while handling
// resources/read", or "… while making the call" when parked).
const (
	notPassed   = "its result cannot be passed on: "
	noResult    = "its answer holds neither a result nor an error"
	nullAskText = "the result's inputRequests holds null, not an input request"
)

// readsNotPassedOn is TestReadResultNotPassedOnNotRecorded through cs.
func readsNotPassedOn(t *testing.T, l *testLog, cs *mcp.ClientSession) {
	for name, want := range map[string][2]string{ // "": passed on
		"null":     {notPassed + "the resources/read result is not a JSON object", notPassed + "the prompts/get result is not a JSON object"},
		"metanull": {notPassed + "the result's _meta is not an object", notPassed + "the result's _meta is not an object"},
		"empty":    {notPassed + "the result has no contents", notPassed + "the result has no messages"},
		"nullitem": {notPassed + "the result's contents is not an array of objects", notPassed + "the result's messages is not an array of objects"},
		"array":    {"cannot unmarshal", "cannot unmarshal"},
		"meta":     {"cannot unmarshal", "cannot unmarshal"},
		"list":     {"cannot unmarshal", "cannot unmarshal"},
		"both":     {notPassed + "the result has both contents and inputRequests", notPassed + "the result has both messages and inputRequests"},
		"none":     {noResult, noResult},
		"nullask":  {notPassed + nullAskText, notPassed + nullAskText},
		"ok":       {"", ""},
	} {
		t.Run(name, func(t *testing.T) {
			errs, wrote := readEach(t, l, cs, "raw+raw://"+name, "raw__"+name)
			for i, kind := range []string{log.KindResourceRead, log.KindPromptGet} {
				if want[i] != "" {
					checkReadRefused(t, kind, "raw", errs[i], wrote[i], want[i])
				} else if errs[i] != nil || len(wrote[i]) != 1 || !strings.Contains(wrote[i][0], `"kind":"`+kind+`"`) {
					t.Errorf("the %s: %v, recorded as %q", kind, errs[i], wrote[i])
				}
			}
		})
	}
}

// TestHTTPReadResultNotPassedOnNotRecorded is
// TestReadResultNotPassedOnNotRecorded over HTTP, the results in an event
// stream, on every way a read takes: a client of an older revision and a
// 2026-07-28 one, on the server's 2025-11-25 session (the one's read as
// it is, the other's parked) and on its 2026-07-28 session (the one's
// bridged, the other's as it is).
func TestHTTPReadResultNotPassedOnNotRecorded(t *testing.T) {
	ask := `"inputRequests":{"ask":` + rawElicit + `}`
	for name, tc := range map[string]struct{ resource, prompt, want, wantPrompt string }{
		"null":     {`"result":null`, `"result":null`, notPassed + "the resources/read result is not a JSON object", notPassed + "the prompts/get result is not a JSON object"},
		"metanull": {`"result":{"_meta":null,"contents":[]}`, `"result":{"_meta":null,"messages":[]}`, notPassed + "the result's _meta is not an object", ""},
		"escaped":  {`"result":{"\u005fmeta":null,"contents":[]}`, `"result":{"\u005fmeta":null,"messages":[]}`, notPassed + "the result's _meta is not an object", ""},
		"array":    {`"result":[1,2]`, `"result":[1,2]`, "cannot unmarshal", ""},
		"none":     {``, ``, noResult, ""},
		"meta":     {`"result":{"_meta":[1],"contents":[]}`, `"result":{"_meta":[1],"messages":[]}`, "cannot unmarshal", ""},
		"list":     {`"result":{"contents":{"uri":"res://x","text":"x"}}`, `"result":{"messages":{"role":"user","content":{"type":"text","text":"x"}}}`, "cannot unmarshal", ""},
		"both": {`"result":{"resultType":"input_required","contents":[{"uri":"res://x","text":"x"}],` + ask + `}`,
			`"result":{"resultType":"input_required","messages":[{"role":"user","content":{"type":"text","text":"x"}}],` + ask + `}`,
			notPassed + "the result has both contents and inputRequests", notPassed + "the result has both messages and inputRequests"},
		"nullask": {`"result":` + rawReadResults["nullask"].resource, `"result":` + rawReadResults["nullask"].prompt, notPassed + nullAskText, ""},
	} {
		t.Run(name, func(t *testing.T) {
			for _, session := range []string{"2025-11-25", statelessProtocol} {
				l := newTestLog(t)
				p := readOddProxy(t, l, session, func(w http.ResponseWriter, r *http.Request, method string) {
					member := tc.resource
					if method == "prompts/get" {
						member = tc.prompt
					}
					w.Header().Set("Content-Type", "text/event-stream")
					w.Write([]byte(`data: {"jsonrpc":"2.0","id":` + callRequestID(t, r) + sep(member) + member + "}\n\n"))
				})
				for front, cs := range map[string]*mcp.ClientSession{
					"older": connectMemory(t, p, nil),
					"newer": connectHTTP(t, serveHTTP(t, p), "", nil),
				} {
					t.Run(session+"/"+front, func(t *testing.T) {
						errs, wrote := readEach(t, l, cs, "m+res://x", "m__x")
						checkReadRefused(t, log.KindResourceRead, "m", errs[0], wrote[0], tc.want)
						checkReadRefused(t, log.KindPromptGet, "m", errs[1], wrote[1], cmp.Or(tc.wantPrompt, tc.want))
					})
				}
			}
		})
	}
}

// readOddProxy starts a proxy on log l in front of an HTTP MCP server,
// spoken to in revision session only, with resource res://x and prompt x
// that answers their resources/read and prompts/get POSTs with answer
// (everything else is go-sdk's).
func readOddProxy(t *testing.T, l *testLog, session string, answer func(w http.ResponseWriter, r *http.Request, method string)) *Proxy {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, nil)
	srv.AddResource(&mcp.Resource{URI: "res://x", Name: "x"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "x"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	// go-sdk serves 2026-07-28 sessionless only.
	opts := &mcp.StreamableHTTPOptions{Stateless: session == statelessProtocol}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		for _, method := range []string{"resources/read", "prompts/get"} {
			if bytes.Contains(body, []byte(`"`+method+`"`)) {
				answer(w, r, method)
				return
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	return startProxy(t, l, []ServerConfig{{ID: "m", URL: down.URL, Protocol: session}}, nil)
}

// TestNewerReadAskingForNothing: a 2026-07-28 client's resources/read on
// the server's 2026-07-28 session, answered input_required with neither
// inputRequests nor contents (requestState alone), is refused as a result
// with no contents, and nothing is recorded: go-sdk's front takes a
// result of that revision as input_required by its inputRequests, not by
// the server's resultType, and refuses one with no contents ("read
// handler returned nil information") after its resource.read entry was
// written. The same prompts/get result, complete to go-sdk's front, is
// refused as one with no messages (TestTypeScriptClientReadRefused).
func TestNewerReadAskingForNothing(t *testing.T) {
	l := newTestLog(t)
	p := readOddProxy(t, l, statelessProtocol, func(w http.ResponseWriter, r *http.Request, _ string) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"jsonrpc":"2.0","id":` + callRequestID(t, r) + `,"result":{"resultType":"input_required","requestState":"s"}}` + "\n\n"))
	})
	errs, wrote := readEach(t, l, connectHTTP(t, serveHTTP(t, p), "", nil), "m+res://x", "m__x")
	checkReadRefused(t, log.KindResourceRead, "m", errs[0], wrote[0], notPassed+"the result has no contents")
	checkReadRefused(t, log.KindPromptGet, "m", errs[1], wrote[1], notPassed+"the result has no messages")
}

// TestTypeScriptClientReadRefused: prompts/get results with messages that
// are none or hold null, which go-sdk's front passes on and the
// TypeScript SDK's client refuses (a ZodError), were recorded as
// prompt.get entries of what the client never got: the client is told
// what was wrong now, and nothing is recorded; a good result of the same
// server is read and recorded.
func TestTypeScriptClientReadRefused(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, func(o *Options) { o.Actor = nil })
	before := l.size(t)
	r := runTSClient(t, map[string]any{"transport": "http", "url": serveHTTP(t, p), "token": testToken, "steps": []map[string]any{
		{"op": "getPrompt", "name": "raw__nullitem"},
		{"op": "getPrompt", "name": "raw__empty"},
		{"op": "getPrompt", "name": "raw__ok"},
	}})
	if r.ConnectError != nil || len(r.Steps) != 3 {
		t.Fatalf("the TypeScript client: %+v", r)
	}
	for i, want := range []string{"the result's messages is not an array of objects", "the result has no messages"} {
		if s := r.Steps[i]; s.OK || s.Error == nil || !strings.Contains(s.Error.Message, `server "raw": `+notPassed+want) {
			t.Errorf("step %d: ok %v, %+v; want an error saying %q", i, s.OK, s.Error, want)
		}
	}
	if !r.Steps[2].OK {
		t.Errorf("a good prompt: %+v", r.Steps[2].Error)
	}
	if n := l.size(t) - before; n != 1 {
		t.Errorf("%d entries written, want 1 (the good prompt's)", n)
	}
}

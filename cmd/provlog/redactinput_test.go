package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/otlp/otlptest"
)

// The secrets of TestRedactedInputWrittenNowhere: the client's answers
// to a server's two rounds of questions (under the redacted field name),
// a tool argument bound to an Mcp-Param-* header, the Authorization
// header of a downstream's configuration and the client's own bearer
// token.
const (
	leakAnswer1    = "ans1-Secret/4+kq"
	leakAnswer2    = "ans2-Secret/9+zw"
	leakParam      = "param-Secret-73a"
	leakDownHeader = "down-Bearer-88f2c"
	leakClientAuth = "client-Bearer-61d0e"
)

// askServer asks the client twice during tools "ask" and "ask_fail"
// (SEP-2322 inputRequests; the SDK makes them requests during the call
// for a client of an older revision), keeping the first answer in its
// requestState (base64), then echoes both answers and its arguments in
// the result or in a JSON-RPC error. Tool "param" binds its argument
// token to an Mcp-Param-Token header.
func askServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "askfx", Version: "1"}, &mcp.ServerOptions{HasTools: true})
	obj := json.RawMessage(`{"type":"object"}`)
	ask := func(fail bool) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			in := req.Params.InputResponses
			elicit := func(round string) mcp.InputRequestMap {
				schema := map[string]any{"type": "object", "properties": map[string]any{"token": map[string]any{"type": "string"}}}
				return mcp.InputRequestMap{round: &mcp.ElicitParams{Message: round + " for " + string(req.Params.Arguments), RequestedSchema: schema}}
			}
			answer := func(id string) string {
				r, _ := in[id].(*mcp.ElicitResult)
				if r == nil {
					return ""
				}
				tok, _ := r.Content["token"].(string)
				return tok
			}
			var first []byte
			second := answer("round2")
			switch {
			case in["round1"] != nil && req.Session.InitializeParams().ProtocolVersion < "2026-07-28":
				// The SDK asks an older session's client once and calls
				// the handler once more: round 2 is asked here.
				r, err := req.Session.Elicit(ctx, elicit("round2")["round2"].(*mcp.ElicitParams))
				if err != nil {
					return nil, err
				}
				first, second = []byte(answer("round1")), ""
				if tok, ok := r.Content["token"].(string); ok {
					second = tok
				}
			case in["round1"] != nil:
				return &mcp.CallToolResult{InputRequests: elicit("round2"), RequestState: "st." + base64.RawURLEncoding.EncodeToString([]byte(answer("round1")))}, nil
			case in["round2"] == nil:
				return &mcp.CallToolResult{InputRequests: elicit("round1"), RequestState: "st0"}, nil
			default:
				first, _ = base64.RawURLEncoding.DecodeString(strings.TrimPrefix(req.Params.RequestState, "st."))
			}
			got := fmt.Sprintf("answers %s and %s to %s", first, second, req.Params.Arguments)
			if fail {
				// The second answer in base64 too, a key the server
				// made of it.
				key := base64.StdEncoding.EncodeToString([]byte(second))
				return nil, &jsonrpc.Error{Code: -32001, Message: "refused " + got + " with key " + key, Data: json.RawMessage(`{"token":"` + second + `"}`)}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: got}}}, nil
		}
	}
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: obj}, ask(false))
	s.AddTool(&mcp.Tool{Name: "ask_fail", InputSchema: obj}, ask(true))
	s.AddTool(&mcp.Tool{Name: "param", InputSchema: json.RawMessage(`{"type":"object","properties":{"token":{"type":"string","x-mcp-header":"Token"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "header " + req.Extra.Header.Get("Mcp-Param-Token")}}}, nil
		})
	return s
}

// askClient connects to the sidecar at base in protocol revision rev,
// answering its two elicitations with leakAnswer1 and leakAnswer2.
func askClient(t *testing.T, base, token, rev string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "asker", Version: rev}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			tok := leakAnswer2
			if strings.HasPrefix(req.Params.Message, "round1") {
				tok = leakAnswer1
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"token": tok}}, nil
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connecting to %s/mcp in %s: %v", base, rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestRedactedInputWrittenNowhere is TestRedactedValuesWrittenNowhere
// for the input a server asks the client for during a call: clients of
// both revisions answer two rounds of elicitation with secrets under the
// redacted field name, to servers that ask in the client's revision, in
// 2026-07-28's (bridge.go) and in 2025-11-25's (park.go); the server
// keeps the first answer in its requestState and echoes both in its
// result or error (the second in base64 too). It also sends a redacted argument bound to an
// Mcp-Param-* header and configures a downstream's Authorization header;
// neither they nor the client's bearer token may be written anywhere.
func TestRedactedInputWrittenNowhere(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	rcv := otlptest.Start(t)
	token := leakClientAuth
	sum := sha256.Sum256([]byte(token))
	var mu sync.Mutex
	var unauthorized int
	// A stateful handler's sessions are 2025-11-25; a stateless one
	// serves 2026-07-28.
	downstream := func(stateless bool) *httptest.Server {
		handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return askServer() }, &mcp.StreamableHTTPOptions{Stateless: stateless})
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+leakDownHeader {
				mu.Lock()
				unauthorized++
				mu.Unlock()
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			handler.ServeHTTP(w, r)
		}))
	}
	newer, older := downstream(true), downstream(false)
	defer newer.Close()
	defer older.Close()
	data := filepath.Join(t.TempDir(), "data")
	var servers strings.Builder
	for id, proto := range map[string]string{"ah": "", "ab": "2026-07-28", "ap": "2025-11-25"} {
		down := newer
		if id == "ap" {
			down = older
		}
		if proto != "" {
			proto = "protocol: " + proto + ", "
		}
		fmt.Fprintf(&servers, "  - {id: %s, url: %q, %sredact: [token], redact_ignore_case: true, retain: full, headers: {Authorization: \"Bearer %s\"}}\n",
			id, down.URL, proto, leakDownHeader)
	}
	cfg := fmt.Sprintf("data: %s\norigin: provlog.test/redact\nactors: [{id: alice, token_sha256: %s}]\nlog: {level: debug}\notel: {endpoint: %q}\nservers:\n%s",
		data, hex.EncodeToString(sum[:]), rcv.URL, servers.String())
	cfgPath := writeFile(t, filepath.Join(t.TempDir(), "provlog.yaml"), []byte(cfg))
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { sp.stop(t) })
	defer stop()
	waitTools(t, sp.base, token, []string{"ah__ask", "ab__ask", "ap__ask", "ah__param"})
	ctx := context.Background()
	trace := mcp.Meta{"traceparent": "00-" + otelParentTrace + "-" + otelParentSpan + "-01"}
	args := json.RawMessage(`{"note":"kept"}`)
	var cs *mcp.ClientSession
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		cs = askClient(t, sp.base, token, rev)
		for _, id := range []string{"ah", "ab", "ap"} {
			for _, tool := range []string{"ask", "ask_fail"} {
				name := id + "__" + tool
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: trace})
				if tool == "ask_fail" {
					if err == nil || !strings.Contains(err.Error(), leakAnswer1) || !strings.Contains(err.Error(), leakAnswer2) {
						t.Errorf("%s in %s: %v; want the server's error with both answers", name, rev, err)
					}
					continue
				}
				if b, _ := json.Marshal(res); err != nil || !strings.Contains(string(b), leakAnswer1) || !strings.Contains(string(b), leakAnswer2) {
					t.Errorf("%s in %s: %s, %v; want the server's result with both answers", name, rev, b, err)
				}
			}
		}
		if _, err := cs.ListTools(ctx, nil); err != nil { // the SDK client binds headers from the listed schema
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ah__param", Arguments: map[string]any{"token": leakParam}, Meta: trace})
		if b, _ := json.Marshal(res); err != nil || !strings.Contains(string(b), leakParam) && rev >= "2026" {
			t.Errorf("ah__param in %s: %s, %v; want the header's value echoed", rev, b, err)
		}
	}
	answers := provlogAnswers(t, cs, sp.base, token)
	stop()
	if unauthorized > 0 {
		t.Errorf("%d requests reached the downstream without its configured Authorization header", unauthorized)
	}
	searchWritten(t, sp, rcv, data, answers, leakForms(leakAnswer1, leakAnswer2, leakParam, leakDownHeader, leakClientAuth))
}

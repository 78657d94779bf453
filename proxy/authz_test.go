package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/opp/oppmcp"
	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// staticTokens is an authenticator of the static tokens f knows.
func staticTokens(f func(tok string) (actor string, ok bool)) *authn.Authenticator {
	return authn.Static(func(tok string) (string, bool, bool) {
		actor, ok := f(tok)
		return actor, false, ok
	})
}

const oauthResource = "https://provlog.test/mcp"

// oauthFront is a proxy with the fixture server and the task tools
// behind an HTTP front that trusts a test issuer.
type oauthFront struct {
	p   *Proxy
	l   *testLog
	is  *authntest.Issuer
	url string
}

type oppLog struct{ l *testLog }

func (o oppLog) Append(ctx context.Context, e []byte) (*log.Receipt, error) {
	return o.l.seq.Append(ctx, e)
}

func (o oppLog) LatestSize(ctx context.Context) (uint64, error) {
	st, err := o.l.store.State(ctx)
	return st.Size, err
}

func (o oppLog) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	return o.l.store.Entries(ctx, start, end)
}

// startOAuthFront starts an oauthFront; tweak, if given, changes the
// auth: config first.
func startOAuthFront(t *testing.T, tweak ...func(*authn.Config)) *oauthFront {
	t.Helper()
	l := newTestLog(t)
	fx := fixtureServerConfig(t, "fx")
	fx.Env[fixtureEnv] = "lists" // with a prompt and resources
	p := startProxy(t, l, []ServerConfig{fx}, nil)
	eng, err := opp.Open(context.Background(), oppLog{l}, l.size(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	oppmcp.Register(p.Server(), eng, func(_ context.Context, req *mcp.CallToolRequest) (string, error) {
		return req.Extra.TokenInfo.UserID, nil
	})
	is := authntest.Start(t)
	cfg := &authn.Config{Resource: oauthResource,
		Issuers: []authn.IssuerConfig{{Issuer: is.URL, DiscoveryURL: is.DiscoveryURL()}},
		Scopes:  authn.Scopes{Tools: []string{"provlog.tools"}, Tasks: []string{"provlog.tasks"}, Log: []string{"provlog.log"}}}
	for _, f := range tweak {
		f(cfg)
	}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(cfg, authn.Options{Static: func(tok string) (string, bool, bool) { return "static", false, tok == testToken }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.HTTPHandler(a))
	t.Cleanup(srv.Close)
	return &oauthFront{p: p, l: l, is: is, url: srv.URL + "/mcp"}
}

// post sends one JSON-RPC message of the stateless revision, so no
// session is needed, and returns the answer.
func (f *oauthFront) post(t *testing.T, token, body string) (*http.Response, string) {
	t.Helper()
	var m rpcPeek
	json.Unmarshal([]byte(body), &m)
	method, name := m.methodAndName()
	h := map[string]string{"Mcp-Protocol-Version": statelessProtocol, "Mcp-Method": method, "Mcp-Name": name}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return postMCP(t, f.url, body, h)
}

const statelessMeta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

const (
	rawCallOK     = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__ok","arguments":{}` + statelessMeta + `}}`
	rawCallCreate = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_task","arguments":{"title":"t"}` + statelessMeta + `}}`
	rawCallStatus = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"provlog__status","arguments":{}` + statelessMeta + `}}`
)

// TestOAuthRefusals: every bad token of the table, and a good one without
// the scope of what it calls, is refused at the front with the right
// status and challenge, and nothing is written to the log.
func TestOAuthRefusals(t *testing.T) {
	f := startOAuthFront(t)
	meta := `resource_metadata="https://provlog.test/.well-known/oauth-protected-resource/mcp"`
	// A good token first, so the key set is cached.
	if resp, body := f.post(t, f.is.Mint(t, f.is.Claims(oauthResource, "alice", "provlog.tools")), rawCallOK); resp.StatusCode != 200 {
		t.Fatalf("good token: %s %s", resp.Status, body)
	}
	size := f.l.size(t)
	type refusal struct {
		name, token, body string
		status            int
		challenge         []string
	}
	cases := []refusal{{name: "no token", body: rawCallOK, status: 401, challenge: []string{"Bearer " + meta}}}
	for _, b := range f.is.BadTokens(t, oauthResource, "provlog.tools", "provlog.tasks", "provlog.log") {
		cases = append(cases, refusal{b.Name, b.Token, rawCallOK, b.Status, []string{meta, `error="` + b.Code + `"`}})
	}
	tasksOnly := f.is.Mint(t, f.is.Claims(oauthResource, "alice", "provlog.tasks"))
	toolsOnly := f.is.Mint(t, f.is.Claims(oauthResource, "alice", "provlog.tools"))
	cases = append(cases,
		refusal{"downstream tool without its scope", tasksOnly, rawCallOK, 403, []string{meta, `error="insufficient_scope"`, `scope="provlog.tools"`}},
		refusal{"task tool without its scope", toolsOnly, rawCallCreate, 403, []string{`error="insufficient_scope"`, `scope="provlog.tasks"`}},
		refusal{"provlog__ tool without the log scope", toolsOnly, rawCallStatus, 403, []string{`error="insufficient_scope"`, `scope="provlog.log"`}},
		refusal{"a batch hiding a call", tasksOnly, `[{"jsonrpc":"2.0","id":9,"method":"ping"},` + rawCallOK + `]`, 403, []string{`scope="provlog.tools"`}},
		// Names in another case are other members to the SDK, which
		// matches case exactly: they hid the call from the scope check.
		refusal{"a Method beside the method", tasksOnly, strings.Replace(rawCallOK, `"method":"tools/call"`, `"method":"tools/call","Method":"ping"`, 1), 403, []string{`scope="provlog.tools"`}},
		refusal{"a Name beside the name", tasksOnly, strings.Replace(rawCallOK, `"name":"fx__ok"`, `"name":"fx__ok","Name":"create_task"`, 1), 403, []string{`scope="provlog.tools"`}},
	)
	for _, c := range cases {
		resp, body := f.post(t, c.token, c.body)
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != c.status {
			t.Errorf("%s: %s (%s), want %d", c.name, resp.Status, strings.TrimSpace(body), c.status)
		}
		for _, want := range c.challenge {
			if !strings.Contains(ch, want) {
				t.Errorf("%s: WWW-Authenticate %q lacks %s", c.name, ch, want)
			}
		}
		if c.token != "" && (strings.Contains(body, c.token) || strings.Contains(ch, c.token)) {
			t.Errorf("%s: the answer repeats the token", c.name)
		}
		if n := f.l.size(t); n != size {
			t.Fatalf("%s: the log grew from %d to %d entries", c.name, size, n)
		}
	}
}

// TestOAuthEntries: a token for alice, used by agent-7 on her behalf
// (an RFC 8693 act chain), calls a downstream tool over a stateful
// session, reads a resource and a prompt, and creates and accepts a task;
// every entry it writes carries the mapped actor and the token's claims,
// never the token.
func TestOAuthEntries(t *testing.T) {
	f := startOAuthFront(t)
	c := f.is.Claims(oauthResource, "alice", "provlog.tools", "provlog.tasks")
	c["act"] = map[string]any{"sub": "agent-7", "act": map[string]any{"sub": "orchestrator"}}
	tok := f.is.Mint(t, c)
	sum := sha256.Sum256([]byte(tok))
	actor := strings.TrimPrefix(f.is.URL, "http://") + ":alice"
	start := f.l.size(t)

	cl := mcp.NewClient(&mcp.Implementation{Name: "oauth-client", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: &bearer{tok, http.DefaultTransport}}}
	cs, err := cl.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ok", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("fx__ok: %v %v", res, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": "delegated"}})
	if err != nil || res.IsError {
		t.Fatalf("create_task: %v %v", res, err)
	}
	var created struct {
		TaskID string `json:"task_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &created)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "accept_task", Arguments: map[string]any{"task_id": created.TaskID}}); err != nil || res.IsError {
		t.Fatalf("accept_task: %v %v", res, err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "fx+fixture:///a"}); err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "fx__p1"}); err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	// And one stateless call (2026-07-28), which takes the other route.
	if resp, body := f.post(t, tok, rawCallOK); resp.StatusCode != 200 {
		t.Fatalf("stateless call: %s %s", resp.Status, body)
	}

	kinds := map[string]int{}
	for i := start; i < f.l.size(t); i++ {
		raw := f.l.entry(t, i)
		e, err := log.ParseEntry(raw)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == "tools" {
			continue // the proxy's own, on first list
		}
		kinds[e.Kind]++
		if strings.Contains(string(raw), tok) {
			t.Errorf("entry %d holds the token", i)
		}
		if e.Actor != actor || e.Auth == nil {
			t.Errorf("entry %d (%s): actor %q, auth %v; want %q with auth", i, e.Kind, e.Actor, e.Auth, actor)
			continue
		}
		a := e.Auth
		if a.Issuer != f.is.URL || a.Subject != "alice" || a.ClientID != "agent-7" || a.TokenSHA256 != hex.EncodeToString(sum[:]) ||
			a.Act == nil || a.Act.Subject != "agent-7" || a.Act.Act == nil || a.Act.Act.Subject != "orchestrator" || a.Via != log.AuthViaJWT {
			t.Errorf("entry %d (%s): auth %s", i, e.Kind, raw)
		}
	}
	want := map[string]int{"call": 2, "call.result": 2, "task.create": 1, "task.accept": 1, "resource.read": 1, "prompt.get": 1}
	if mustJSON(kinds) != mustJSON(want) {
		t.Errorf("entries written: %v, want %v", kinds, want)
	}
}

// BenchmarkCallAuthorization: what an OAuth token adds to one recorded
// call at the front once the issuer's keys are cached: the token (seen
// before, so remembered) and the scope check of a tools/call with 1 KiB
// of arguments, for a token with every group's scopes (the body is not
// looked at) and for one without the task scope (it is). Compare with
// BenchmarkAuthenticate in package authn.
func BenchmarkCallAuthorization(b *testing.B) {
	is := authntest.Start(b)
	cfg := &authn.Config{Resource: oauthResource, Issuers: []authn.IssuerConfig{{Issuer: is.URL, JWKSURL: is.JWKSURL()}},
		Scopes: authn.Scopes{Tools: []string{"provlog.tools"}, Tasks: []string{"provlog.tasks"}}}
	if err := cfg.Check(); err != nil {
		b.Fatal(err)
	}
	a, err := authn.New(cfg, authn.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{router: newRouter()}
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{"message":"` + strings.Repeat("x", 1024) + `"}}}`)
	for _, c := range []struct {
		name   string
		scopes []string
	}{{"every-scope", []string{"provlog.tools", "provlog.tasks"}}, {"tools-only", []string{"provlog.tools"}}} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+is.Mint(b, is.Claims(oauthResource, "alice", c.scopes...)))
		if _, err := a.Request(r); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				id, err := a.Request(r)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.checkScopes(a, id, body); err != nil && c.name == "every-scope" {
					b.Fatal(err)
				}
			}
		})
	}
}

// swapBearer sends whichever token it holds now.
type swapBearer struct {
	mu    sync.Mutex
	token string
}

func (b *swapBearer) set(tok string) { b.mu.Lock(); b.token = tok; b.mu.Unlock() }

func (b *swapBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	tok := b.token
	b.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestOAuthEntriesPerRequest: in a session opened with one token, the
// requests that a refreshed token (the same person, another token) sends
// are recorded with the claims of the token that sent them, on the fast
// path and through the SDK's handler alike (whose handlers run in the
// context of the request that opened the session).
func TestOAuthEntriesPerRequest(t *testing.T) {
	f := startOAuthFront(t)
	first := f.is.Mint(t, f.is.Claims(oauthResource, "alice", "provlog.tools", "provlog.tasks"))
	second := f.is.Mint(t, f.is.Claims(oauthResource, "alice", "provlog.tools", "provlog.tasks"))
	if first == second {
		t.Fatal("the issuer minted the same token twice")
	}
	rt := &swapBearer{token: first}
	cl := mcp.NewClient(&mcp.Implementation{Name: "oauth-client", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rt.set(second)
	start := f.l.size(t)
	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("fx__ok: %v %v", res, err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": "refreshed"}}); err != nil || res.IsError {
		t.Fatalf("create_task: %v %v", res, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fx+fixture:///a"}); err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__p1"}); err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	sum := sha256.Sum256([]byte(second))
	want := hex.EncodeToString(sum[:])
	n := 0
	for i := start; i < f.l.size(t); i++ {
		e, err := log.ParseEntry(f.l.entry(t, i))
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == "tools" {
			continue
		}
		n++
		if e.Auth == nil || e.Auth.TokenSHA256 != want {
			t.Errorf("entry %d (%s): auth %+v, want the claims of the token that sent it (sha256 %s)", i, e.Kind, e.Auth, want)
		}
	}
	if n < 5 {
		t.Errorf("%d entries written, want the call, its result, the task, the read and the prompt", n)
	}
}

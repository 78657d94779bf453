package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/tools/hydratest"
)

// Scopes the OAuth tests' sidecar asks for, per tool group.
const (
	scopeTools = "provlog.tools"
	scopeTasks = "provlog.tasks"
	scopeLog   = "provlog.log"
)

// oauthSidecar is provlog serving MCP over HTTP with a real ORY Hydra as
// its authorization server and npm's server-everything downstream.
type oauthSidecar struct {
	hydra    *hydratest.Server
	base     string // http://127.0.0.1:PORT
	resource string // base + "/mcp": the tokens' audience
	data     string
	stderr   *lockedBuffer
	stop     func()
}

// startOAuthSidecar starts Hydra, then provlog with an auth: section
// trusting it through OpenID Connect discovery, 1s of clock skew.
func startOAuthSidecar(t *testing.T) *oauthSidecar {
	t.Helper()
	return startOAuthSidecarWith(t, hydratest.Options{}, func(s *oauthSidecar) string {
		return fmt.Sprintf(`auth:
  resource: %s
  issuers:
    - issuer: %s
      discovery_url: %s
      actor_prefix: "hydra:"
  scopes:
    tools: [%s]
    tasks: [%s]
    log: [%s]
  clock_skew: 1s
`, s.resource, s.hydra.Issuer, s.hydra.DiscoveryURL, scopeTools, scopeTasks, scopeLog)
	})
}

// startOAuthSidecarWith starts Hydra with o, then provlog with the auth:
// section auth returns.
func startOAuthSidecarWith(t *testing.T, o hydratest.Options, auth func(*oauthSidecar) string) *oauthSidecar {
	t.Helper()
	hy := hydratest.Start(t, o)
	node, err := exec.LookPath("node")
	if err != nil {
		missingPrereq(t, "node is not installed")
	}
	js := filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(js); err != nil {
		missingPrereq(t, fmt.Sprintf("npm server-everything not found (%v)", err))
	}
	addr := freeAddr(t)
	s := &oauthSidecar{hydra: hy, base: "http://" + addr, data: filepath.Join(t.TempDir(), "data"), stderr: &lockedBuffer{}}
	s.resource = s.base + "/mcp"
	cfg := filepath.Join(t.TempDir(), "provlog.yaml")
	conf := fmt.Sprintf("data: %s\nservers:\n  - id: everything\n    command: [%q, %q, stdio]\n", s.data, node, js) + auth(s)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg, "--http", addr}, s.stderr, s.stderr) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(s.base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up: %s", s.stderr.String())
		}
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("serve exited with %d: %s", code, s.stderr.String())
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

func missingPrereq(t *testing.T, msg string) {
	t.Helper()
	msg += `; run: eval "$(bash tools/mcptest/install.sh)"`
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// size is the sidecar's current log size, from its public checkpoint.
func (s *oauthSidecar) size(t *testing.T) uint64 {
	t.Helper()
	resp, err := http.Get(s.base + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c, err := log.ParseCheckpointNote(b)
	if err != nil {
		t.Fatalf("checkpoint: %v: %s", err, b)
	}
	return c.Size
}

// entry reads entry n through the log API with token.
func (s *oauthSidecar) entry(t *testing.T, token string, n uint64) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/log/entry/%d", s.base, n), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /log/entry/%d: %s: %s", n, resp.Status, b)
	}
	var e map[string]any
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// work drives one identity through a downstream tool and a task it
// creates, accepts and claims done, citing the tool call as evidence.
func (s *oauthSidecar) work(t *testing.T, token, what string) (taskID string) {
	t.Helper()
	cs := connectHTTP(t, s.base, token)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": what})
	taskID, _ = created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": taskID})
	_, rc := callTool(t, cs, "everything__echo", map[string]any{"message": what})
	r, err := log.ParseReceipt([]byte(rc))
	if err != nil {
		t.Fatalf("echo receipt: %v", err)
	}
	call := r.Index
	if e := s.entry(t, token, r.Index); e["kind"] == "call.result" {
		call = uint64(e["call"].(float64))
	}
	callTool(t, cs, "report_completion", map[string]any{"task_id": taskID, "provenance": "observed",
		"summary": "echoed " + what, "evidence": []uint64{call}})
	cs.Close()
	return taskID
}

// jwtClaims decodes a JWT's payload (its signature was checked by the
// sidecar; the test only reads the claims it expects in entries).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOAuthHydraEndToEnd drives provlog with tokens from a real ORY
// Hydra: a client-credentials token (a bot acting as itself) and a
// delegated one (an agent acting for alice, RFC 7523 with an act claim;
// see package hydratest for why not RFC 8693), through a downstream
// tool and a task claim. The entries name the right actor and carry the
// token's claims and hash, never the token. A token signed by a key
// Hydra rotated in is taken once provlog has fetched Hydra's keys again;
// tokens signed by Hydra but for another audience, expired, with a
// withdrawn key, tampered with, from another (untrusted) Hydra, or
// without the scope asked for are refused with nothing written.
func TestOAuthHydraEndToEnd(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource, otherResource}})
	botTok := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	alice := hy.TrustDelegator(t, "alice", allScopes...)
	agent := hy.CreateClient(t, hydratest.Client{ID: "review-agent", Scopes: allScopes, Audience: []string{s.resource},
		GrantTypes: []string{hydratest.JWTBearerGrant}, Act: true})
	agentTok := mint(t)(hy.JWTBearer(ctx, agent, alice.Assertion(t), s.resource, allScopes...))

	fetched := time.Now() // provlog fetches Hydra's keys at the first token
	botTask := s.work(t, botTok, "bot's own work")
	aliceTask := s.work(t, agentTok, "work for alice")

	// Hydra rotates its signing key: a new key, then one more that is
	// withdrawn before provlog ever sees it.
	hy.RotateKey(t)
	rotated := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	gone := hy.RotateKey(t)
	withdrawn := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	hy.DeleteKey(t, gone)
	bad := s.badTokens(t, bot)
	// provlog fetches an issuer's keys at most once per 10s (its
	// MinRefresh default), and the short-lived token must be past exp and
	// the 1s skew.
	exp := time.Unix(int64(jwtClaims(t, bad["expired"])["exp"].(float64)), 0)
	until := fetched.Add(10*time.Second + 500*time.Millisecond)
	if e := exp.Add(2*time.Second + 100*time.Millisecond); e.After(until) {
		until = e
	}
	time.Sleep(time.Until(until))
	rotatedTask := s.work(t, rotated, "work under the rotated key")
	bad["withdrawn key"] = withdrawn
	s.refused(t, bad)
	s.insufficientScope(t)

	s.stop()
	entries := readAll(t, s.data)
	checkAuthEntries(t, entries, botTok, "hydra:ci-bot", botTask, nil)
	checkAuthEntries(t, entries, agentTok, "hydra:alice", aliceTask, map[string]any{"sub": "review-agent"})
	checkAuthEntries(t, entries, rotated, "hydra:ci-bot", rotatedTask, nil)
	used := map[string]bool{botTok: true, agentTok: true, rotated: true}
	for _, tok := range bad {
		used[tok] = false
	}
	for tok, u := range used {
		checkTokenAbsent(t, s, tok, u)
	}
	if out, code := runCmd(t, "audit", "--data", s.data); code != 0 {
		t.Fatalf("audit: %s", out)
	}
}

var (
	allScopes     = []string{scopeTools, scopeTasks, scopeLog}
	otherResource = "http://127.0.0.1:1/mcp"
)

// mint fails t if Hydra refused a token.
func mint(t *testing.T) func(string, error) string {
	return func(tok string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// badTokens returns tokens provlog must refuse: Hydra's for another
// audience, one that will have expired when the test uses it, one of
// Hydra's with its payload changed, and one from a second Hydra provlog
// does not trust (for provlog's own resource).
func (s *oauthSidecar) badTokens(t *testing.T, bot hydratest.Client) map[string]string {
	t.Helper()
	hy, ctx := s.hydra, context.Background()
	short := hy.CreateClient(t, hydratest.Client{ID: "short-lived", Scopes: allScopes, Audience: []string{s.resource}, Lifespan: time.Second})
	good := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	parts := strings.Split(good, ".")
	c := jwtClaims(t, good)
	c["sub"] = "admin"
	payload, _ := json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	untrusted := hydratest.Start(t, hydratest.Options{})
	stranger := untrusted.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	return map[string]string{
		"another audience": mint(t)(hy.ClientCredentials(ctx, bot, otherResource, allScopes...)),
		"expired":          mint(t)(hy.ClientCredentials(ctx, short, s.resource, allScopes...)),
		"tampered":         strings.Join(parts, "."),
		"another issuer":   mint(t)(untrusted.ClientCredentials(ctx, stranger, s.resource, allScopes...)),
	}
}

// insufficientScope has a client whose token holds only the tools scope
// try a task tool: refused (403 insufficient_scope), nothing written.
func (s *oauthSidecar) insufficientScope(t *testing.T) {
	t.Helper()
	c := s.hydra.CreateClient(t, hydratest.Client{ID: "tools-only", Scopes: []string{scopeTools}, Audience: []string{s.resource}})
	tok := mint(t)(s.hydra.ClientCredentials(context.Background(), c, s.resource, scopeTools))
	before := s.size(t)
	cs := connectHTTP(t, s.base, tok)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": "not mine to make"}})
	if err == nil && !res.IsError {
		t.Errorf("create_task with only %s: %v", scopeTools, res.StructuredContent)
	} else if err != nil && !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("create_task with only %s: %v; want 403", scopeTools, err)
	}
	cs.Close()
	if after := s.size(t); after != before {
		t.Errorf("a refused task tool wrote %d entries", after-before)
	}
}

// refused posts an MCP initialize with each token and wants 401 with a
// challenge naming the protected resource metadata, and no entry.
func (s *oauthSidecar) refused(t *testing.T, tokens map[string]string) {
	t.Helper()
	before := s.size(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bad","version":"1"}}}`
	for name, tok := range tokens {
		req, _ := http.NewRequest(http.MethodPost, s.resource, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token"`) ||
			!strings.Contains(ch, `resource_metadata="`+s.base+`/.well-known/oauth-protected-resource`) {
			t.Errorf("%s token: %s, WWW-Authenticate %q; want 401, invalid_token and the metadata URL", name, resp.Status, ch)
		}
	}
	if after := s.size(t); after != before {
		t.Errorf("refused tokens wrote %d entries", after-before)
	}
}

// readAll returns every entry of the stopped sidecar's log, decoded.
func readAll(t *testing.T, data string) []map[string]any {
	t.Helper()
	st, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	state, err := st.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.Entries(ctx, 0, state.Size)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	return out
}

// checkAuthEntries wants the entries of token (those naming its jti) to
// be the call, the task's creation, acceptance and claim, written with
// actor and an auth member holding token's issuer, subject, client, jti
// and hash, and the act chain wantAct; and every entry of actor to
// carry an auth member. kinds, if given, are the kinds wanted instead.
func checkAuthEntries(t *testing.T, entries []map[string]any, token, actor, task string, wantAct map[string]any, kinds ...string) {
	t.Helper()
	c := jwtClaims(t, token)
	sum := sha256.Sum256([]byte(token))
	want := map[string]any{"iss": c["iss"], "sub": c["sub"], "client_id": c["client_id"], "jti": c["jti"],
		"token_sha256": hex.EncodeToString(sum[:]), "via": "jwt"}
	seen := map[string]bool{}
	for i, e := range entries {
		auth, _ := e["auth"].(map[string]any)
		kind, _ := e["kind"].(string)
		if e["actor"] == actor && auth == nil {
			t.Errorf("entry %d (%s by %s) has no auth", i, kind, actor)
		}
		if auth == nil || auth["jti"] != c["jti"] {
			continue // another token's entry
		}
		if e["actor"] != actor {
			t.Errorf("entry %d (%s) by %v; want %s", i, kind, e["actor"], actor)
		}
		if tid, _ := e["task_id"].(string); strings.HasPrefix(kind, "task.") && tid != task {
			t.Errorf("entry %d (%s) is about task %s; want %s", i, kind, tid, task)
		}
		seen[kind] = true
		for k, v := range want {
			if auth[k] != v {
				t.Errorf("entry %d (%s): auth.%s = %v; want %v", i, kind, k, auth[k], v)
			}
		}
		if got, _ := json.Marshal(auth["act"]); !bytes.Equal(got, mustJSON(t, wantAct)) {
			t.Errorf("entry %d (%s): auth.act = %s; want %s", i, kind, got, mustJSON(t, wantAct))
		}
	}
	if len(kinds) == 0 {
		kinds = []string{"call", "task.create", "task.accept", "task.claim"}
	}
	for _, k := range kinds {
		if !seen[k] {
			t.Errorf("no %s entry by %s (saw %v)", k, actor, seen)
		}
	}
}

func mustJSON(t *testing.T, v map[string]any) []byte {
	t.Helper()
	if v == nil {
		return []byte("null")
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkTokenAbsent wants no trace of token (nor of its signature, the
// part no claim repeats) in any file of the data dir or in the sidecar's
// stderr. Its jti is the control: the raw bytes of the data dir must show
// it when the token was used (else this search could not see entries at
// all), and must not when it was refused.
func checkTokenAbsent(t *testing.T, s *oauthSidecar, token string, used bool) {
	t.Helper()
	sig := token[strings.LastIndex(token, ".")+1:]
	jti, _ := jwtClaims(t, token)["jti"].(string)
	if strings.Contains(s.stderr.String(), sig) {
		t.Errorf("the sidecar's stderr holds a token")
	}
	if dataHolds(t, s.data, sig) || dataHolds(t, s.data, token) {
		t.Errorf("the data dir holds a token")
	}
	seen := dataHolds(t, s.data, jti)
	if jti == "" || seen != used {
		t.Errorf("jti %q in the data dir: %v; want %v", jti, seen, used)
	}
}

// dataHolds reports whether any file under dir holds needle.
func dataHolds(t *testing.T, dir, needle string) bool {
	t.Helper()
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
		}
		found = found || bytes.Contains(b, []byte(needle))
		return nil
	})
	return found
}

// sdkReport is what tools/mcptest/oauth.mjs prints.
type sdkReport struct {
	Challenge struct {
		Status              int    `json:"status"`
		WWWAuthenticate     string `json:"wwwAuthenticate"`
		ResourceMetadataURL string `json:"resourceMetadataUrl"`
	} `json:"challenge"`
	ResourceMetadata struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	} `json:"resourceMetadata"`
	AuthorizationServer struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	} `json:"authorizationServer"`
	DiscoveryError string `json:"discoveryError"`
	Connect        struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"connect"`
	Call struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"call"`
	TokenClaims map[string]any `json:"tokenClaims"`
}

// runSDK runs oauth.mjs with plan.
func runSDK(t *testing.T, plan map[string]any) sdkReport {
	t.Helper()
	script := filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "oauth.mjs")
	if _, err := os.Stat(script); err != nil {
		missingPrereq(t, fmt.Sprintf("oauth.mjs not found (%v)", err))
	}
	b, _ := json.Marshal(plan)
	cmd := exec.Command("node", script, string(b))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oauth.mjs: %v: %s", err, stderr.String())
	}
	var r sdkReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("oauth.mjs report %q: %v (%s)", out, err, stderr.String())
	}
	return r
}

// TestOAuthTypeScriptSDK has the official TypeScript SDK's client find
// Hydra from provlog's 401 (RFC 9728 metadata) and run its own client
// credentials flow against it. The SDK names provlog with RFC 8707's
// resource parameter, which Hydra v2.3.0 ignores (it reads "audience"):
// the token it gets has no audience and provlog refuses it. With
// Hydra's audience parameter added the same flow reaches the tool, and
// the call is logged under the client.
func TestOAuthTypeScriptSDK(t *testing.T) {
	s := startOAuthSidecar(t)
	hy := s.hydra
	c := hy.CreateClient(t, hydratest.Client{ID: "sdk-client", Scopes: []string{scopeTools, scopeTasks, scopeLog},
		Audience: []string{s.resource}, AuthMethod: "client_secret_basic"})
	plan := map[string]any{"url": s.resource, "clientId": c.ID, "clientSecret": c.Secret, "issuer": hy.Issuer,
		"tool": "everything__echo", "arguments": map[string]any{"message": "from the TS SDK"}}

	r := runSDK(t, plan)
	if r.Challenge.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Challenge.ResourceMetadataURL, s.base+"/.well-known/oauth-protected-resource") {
		t.Errorf("challenge %+v; want 401 naming %s/.well-known/oauth-protected-resource", r.Challenge, s.base)
	}
	if r.DiscoveryError != "" || r.ResourceMetadata.Resource != s.resource || len(r.ResourceMetadata.AuthorizationServers) != 1 ||
		r.ResourceMetadata.AuthorizationServers[0] != hy.Issuer {
		t.Errorf("the SDK discovered %+v (%s); want resource %s and authorization server %s", r.ResourceMetadata, r.DiscoveryError, s.resource, hy.Issuer)
	}
	if r.AuthorizationServer.Issuer != hy.Issuer || r.AuthorizationServer.TokenEndpoint != hy.TokenURL {
		t.Errorf("the SDK found authorization server %+v; want %s, %s", r.AuthorizationServer, hy.Issuer, hy.TokenURL)
	}
	if r.Connect.OK {
		t.Errorf("a token without provlog's audience was accepted")
	}

	// The SDK's client credentials flow asks for the scopes its options
	// name, and no others: none here, so the call is refused for scope
	// (403 insufficient_scope, which the SDK retries once) and not logged.
	plan["audience"] = s.resource
	r = runSDK(t, plan)
	if !r.Connect.OK || r.Call.OK || !strings.Contains(r.Call.Error, "403") {
		t.Errorf("a token without scopes: connect %+v, call %+v; want the call refused with 403", r.Connect, r.Call)
	}

	plan["scope"] = scopeTools
	r = runSDK(t, plan)
	if !r.Connect.OK || !r.Call.OK {
		t.Fatalf("with Hydra's audience parameter: connect %+v, call %+v, token claims %v, resource metadata %+v", r.Connect, r.Call, r.TokenClaims, r.ResourceMetadata)
	}
	s.stop()
	n := 0
	for _, e := range readAll(t, s.data) {
		if e["kind"] == "call" && e["actor"] == "hydra:sdk-client" {
			n++
			if auth, _ := e["auth"].(map[string]any); auth["client_id"] != "sdk-client" || auth["iss"] != hy.Issuer {
				t.Errorf("the SDK's call: auth %v", auth)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d calls by hydra:sdk-client; want 1", n)
	}
}

// hydraREADME returns the README's ORY Hydra section: its YAML blocks
// (Hydra's config, then provlog's auth:) and its hydra commands, each
// split into arguments.
func hydraREADME(t *testing.T) (blocks []string, cmds [][]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n### ORY Hydra\n")
	if !ok {
		t.Fatal("README.md has no ### ORY Hydra section")
	}
	for _, next := range []string{"\n## ", "\n### "} {
		if i := strings.Index(sec, next); i >= 0 {
			sec = sec[:i]
		}
	}
	for rest := sec; ; {
		var block string
		if _, rest, ok = strings.Cut(rest, "```yaml\n"); !ok {
			break
		}
		block, rest, _ = strings.Cut(rest, "```")
		blocks = append(blocks, block)
	}
	var cmd string
	fenced := false
	for _, line := range strings.Split(sec, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		code, ok := strings.CutPrefix(line, "    ")
		if !ok || fenced {
			continue
		}
		if strings.HasPrefix(code, "hydra ") && cmd != "" {
			cmds = append(cmds, strings.Fields(cmd))
			cmd = ""
		}
		cmd += strings.TrimSuffix(code, `\`) + " "
	}
	if cmd != "" {
		cmds = append(cmds, strings.Fields(cmd))
	}
	if len(blocks) != 2 || len(cmds) != 2 {
		t.Fatalf("README's ORY Hydra section: %d YAML blocks, %d commands; want 2 and 2", len(blocks), len(cmds))
	}
	return blocks, cmds
}

// TestOAuthHydraREADME runs the README's ORY Hydra section: Hydra with
// its config, provlog with its auth: block, its two hydra commands for a
// client and a token; the token's calls are the client's.
func TestOAuthHydraREADME(t *testing.T) {
	blocks, cmds := hydraREADME(t)
	urls := func(hy *hydratest.Server, resource string) *strings.Replacer {
		return strings.NewReplacer("https://hydra-admin.example", hy.Admin, "https://hydra.example/", hy.Issuer,
			"https://hydra.example", strings.TrimSuffix(hy.Issuer, "/"), "https://provlog.example/mcp", resource)
	}
	var resource string
	s := startOAuthSidecarWith(t, hydratest.Options{Config: func(hy *hydratest.Server) string {
		return urls(hy, "").Replace(blocks[0])
	}}, func(s *oauthSidecar) string {
		resource = s.resource
		return urls(s.hydra, s.resource).Replace(blocks[1])
	})
	r := urls(s.hydra, resource)
	hydra := func(args []string, vars map[string]string, out any) {
		t.Helper()
		for i, a := range args {
			args[i] = r.Replace(a)
			if v, ok := vars[a]; ok {
				args[i] = v
			}
		}
		if args[0] != "hydra" {
			t.Fatalf("README command %q", args)
		}
		b, err := exec.Command(s.hydra.Binary(), args[1:]...).Output()
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%q printed %s: %v", args, b, err)
		}
	}
	var client struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	hydra(cmds[0], nil, &client)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	hydra(cmds[1], map[string]string{"$CLIENT_ID": client.ID, "$CLIENT_SECRET": client.Secret}, &tok)

	cs := connectHTTP(t, s.base, tok.AccessToken)
	callTool(t, cs, "everything__echo", map[string]any{"message": "from the README"})
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "README"})
	cs.Close()
	s.stop()
	checkAuthEntries(t, readAll(t, s.data), tok.AccessToken, "hydra:"+client.ID, created["task_id"].(string), nil, "call", "task.create")
}

// TestOAuthHydraIntrospection has Hydra issue opaque tokens, which
// provlog checks at Hydra's RFC 7662 endpoint: a client's token reaches a
// tool under its actor, its entries say how it was checked; a token
// Hydra does not know, and one for another audience, are refused.
func TestOAuthHydraIntrospection(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "introspect.secret")
	if err := os.WriteFile(secret, []byte("not checked by Hydra's admin port\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startOAuthSidecarWith(t, hydratest.Options{Opaque: true}, func(s *oauthSidecar) string {
		return fmt.Sprintf(`auth:
  resource: %s
  issuers:
    - issuer: %s
      actor_prefix: "hydra:"
      introspection:
        url: %s
        client_id: provlog
        client_secret_file: %s
  scopes: {tools: [%s], tasks: [%s], log: [%s]}
`, s.resource, s.hydra.Issuer, s.hydra.IntrospectionURL, secret, scopeTools, scopeTasks, scopeLog)
	})
	hy, ctx := s.hydra, context.Background()
	c := hy.CreateClient(t, hydratest.Client{ID: "opaque-bot", Scopes: allScopes, Audience: []string{s.resource, otherResource}})
	tok := mint(t)(hy.ClientCredentials(ctx, c, s.resource, allScopes...))
	if strings.Count(tok, ".") == 2 {
		t.Fatalf("Hydra issued a JWT, not an opaque token")
	}
	cs := connectHTTP(t, s.base, tok)
	callTool(t, cs, "everything__echo", map[string]any{"message": "opaque"})
	cs.Close()
	wrongAud := mint(t)(hy.ClientCredentials(ctx, c, otherResource, allScopes...))
	s.refused(t, map[string]string{"unknown to Hydra": "ory_at_not-a-token-hydra-issued", "another audience": wrongAud})
	s.stop()

	sum := sha256.Sum256([]byte(tok))
	n := 0
	for i, e := range readAll(t, s.data) {
		if e["kind"] != "call" {
			continue
		}
		n++
		auth, _ := e["auth"].(map[string]any)
		if e["actor"] != "hydra:opaque-bot" || auth["via"] != "introspection" || auth["iss"] != hy.Issuer ||
			auth["client_id"] != "opaque-bot" || auth["token_sha256"] != hex.EncodeToString(sum[:]) {
			t.Errorf("entry %d: actor %v, auth %v", i, e["actor"], auth)
		}
	}
	if n != 1 {
		t.Errorf("%d calls logged; want 1", n)
	}
	for _, tk := range []string{tok, wrongAud} {
		if strings.Contains(s.stderr.String(), tk) || dataHolds(t, s.data, tk) {
			t.Error("the sidecar's stderr or data dir holds a token")
		}
	}
}

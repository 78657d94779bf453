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

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/tools/hydratest"
	"github.com/provlog/provlog/tools/oauthtest"
)

// Scopes the OAuth tests' sidecar asks for, per tool group.
const (
	scopeTools = "provlog.tools"
	scopeTasks = "provlog.tasks"
	scopeLog   = "provlog.log"
)

// oauthSidecar is provlog serving MCP over HTTP with a real
// authorization server (ORY Hydra, unless hydra is nil) and npm's
// server-everything downstream.
type oauthSidecar struct {
	hydra    *hydratest.Server
	base     string // http://127.0.0.1:PORT
	resource string // base + "/mcp": the tokens' audience
	data     string
	stderr   *proctest.Buffer
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
  jwks_min_refresh: 2s
`, s.resource, s.hydra.Issuer, s.hydra.DiscoveryURL, scopeTools, scopeTasks, scopeLog)
	})
}

// startOAuthSidecarWith starts Hydra with o, then provlog with the auth:
// section auth returns.
func startOAuthSidecarWith(t *testing.T, o hydratest.Options, auth func(*oauthSidecar) string) *oauthSidecar {
	t.Helper()
	return startAuthSidecar(t, hydratest.Start(t, o), auth)
}

// startAuthSidecar starts provlog with the auth: section auth returns;
// hy is the Hydra it trusts, nil when the authorization server is
// another.
func startAuthSidecar(t *testing.T, hy *hydratest.Server, auth func(*oauthSidecar) string) *oauthSidecar {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missingPrereq(t, "node is not installed")
	}
	js := filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(js); err != nil {
		missingPrereq(t, fmt.Sprintf("npm server-everything not found (%v)", err))
	}
	addr := freeAddr(t)
	s := &oauthSidecar{hydra: hy, base: "http://" + addr, data: filepath.Join(t.TempDir(), "data"), stderr: &proctest.Buffer{}}
	s.resource = s.base + "/mcp"
	cfg := filepath.Join(t.TempDir(), "provlog.yaml")
	conf := fmt.Sprintf("data: %s\nservers:\n  - id: everything\n    command: [%q, %q, stdio]\n", s.data, node, js) + auth(s)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg, "--http", addr}, s.stderr, s.stderr) }()
	cmdtest.WaitHealthy(t, s.base, done, s.stderr)
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
	b := getEntry(t, s.base, token, n)
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

	botTask := s.work(t, botTok, "bot's own work")
	fetched := time.Now() // provlog fetched Hydra's keys for the first token, before this
	aliceTask := s.work(t, agentTok, "work for alice")

	// Hydra rotates its signing key: a new key, then one more that is
	// withdrawn before provlog ever sees it.
	hy.RotateKey(t)
	rotated := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	gone := hy.RotateKey(t)
	withdrawn := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	hy.DeleteKey(t, gone)
	bad := s.badTokens(t, bot)
	// provlog fetches an issuer's keys at most once per jwks_min_refresh
	// (2s here), and the short-lived token must be past exp and the 1s
	// skew.
	exp := time.Unix(int64(oauthtest.Claims(t, bad["expired"])["exp"].(float64)), 0)
	until := fetched.Add(2*time.Second + 500*time.Millisecond)
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
	checkAuthEntries(t, entries, botTok, "hydra:client:ci-bot", botTask, nil)
	checkAuthEntries(t, entries, agentTok, "hydra:alice", aliceTask, map[string]any{"sub": "review-agent"})
	checkAuthEntries(t, entries, rotated, "hydra:client:ci-bot", rotatedTask, nil)
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
	c := oauthtest.Claims(t, good)
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
	c := oauthtest.Claims(t, token)
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
	jti, _ := oauthtest.Claims(t, token)["jti"].(string)
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

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/tools/hydratest"
)

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
	Authorization map[string]string `json:"authorization"`
	TokenClaims   map[string]any    `json:"tokenClaims"`
}

// runSDK runs this checkout's tools/mcptest/oauth.mjs with plan, beside
// the TypeScript SDK install.sh put in PROVLOG_MCPTEST_DIR (not the copy
// of oauth.mjs there, which another checkout on the machine may have
// written).
func runSDK(t *testing.T, plan map[string]any) sdkReport {
	t.Helper()
	mods := filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "node_modules")
	if _, err := os.Stat(filepath.Join(mods, "@modelcontextprotocol/sdk")); err != nil {
		missingPrereq(t, fmt.Sprintf("the TypeScript SDK is not installed (%v)", err))
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "tools", "mcptest", "oauth.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "oauth.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
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
		if e["kind"] == "call" && e["actor"] == "hydra:client:sdk-client" {
			n++
			if auth, _ := e["auth"].(map[string]any); auth["client_id"] != "sdk-client" || auth["iss"] != hy.Issuer {
				t.Errorf("the SDK's call: auth %v", auth)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d calls by hydra:client:sdk-client; want 1", n)
	}
}

// TestOAuthTypeScriptSDKAuthorizationCode: the official TypeScript SDK's
// client, as a public client (no secret), finds Hydra from provlog's 401
// and runs the authorization code flow with PKCE: it sends the user to
// Hydra's authorization endpoint with an S256 challenge and provlog as
// the resource; the user signs in with the login app's form and
// consents (tools/hydratest); the SDK exchanges the code with its
// verifier and calls a tool, which is logged under the user, the client
// in auth. A wrong password gets the form back and no code; a code
// exchanged with another verifier gets no token.
func TestOAuthTypeScriptSDKAuthorizationCode(t *testing.T) {
	s := startOAuthSidecar(t)
	hy := s.hydra
	const redirect = "http://127.0.0.1/oauth/callback" // never fetched: the user agent stops at it
	c := hy.CreateClient(t, hydratest.Client{ID: "sdk-app", Scopes: []string{scopeTools, scopeTasks, scopeLog}, Audience: []string{s.resource},
		GrantTypes: []string{"authorization_code"}, RedirectURIs: []string{redirect}, AuthMethod: "none"})
	plan := map[string]any{"flow": "authorization_code", "url": s.resource, "clientId": c.ID, "redirectUri": redirect, "issuer": hy.Issuer,
		"audience": s.resource, "tool": "everything__echo", "arguments": map[string]any{"message": "for alice, by the TS SDK"}}

	// The login app's sign-in form refuses a wrong password: the form
	// comes back with its error, and Hydra issues no code.
	plan["login"] = map[string]string{"username": hydratest.User, "password": "not " + hydratest.Password}
	r := runSDK(t, plan)
	if r.Connect.OK || !strings.Contains(r.Connect.Error, "sign-in refused (401): Wrong username or password.") {
		t.Fatalf("a wrong password: connect %+v; want the sign-in refused", r.Connect)
	}
	plan["login"] = map[string]string{"username": hydratest.User, "password": hydratest.Password}

	// With another verifier than the one the challenge was made of, Hydra
	// refuses the code (its PKCE check; fosite's words).
	plan["badVerifier"] = true
	r = runSDK(t, plan)
	if r.Connect.OK || r.Authorization == nil || !strings.Contains(r.Connect.Error, "PKCE") {
		t.Fatalf("a code exchanged with another verifier: connect %+v, authorization %v; want no token, for the verifier", r.Connect, r.Authorization)
	}
	delete(plan, "badVerifier")
	r = runSDK(t, plan)
	if r.Challenge.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Challenge.ResourceMetadataURL, s.base+"/.well-known/oauth-protected-resource") {
		t.Errorf("challenge %+v", r.Challenge)
	}
	az := r.Authorization
	want := map[string]string{"endpoint": hy.Issuer + "oauth2/auth", "response_type": "code", "client_id": c.ID,
		"code_challenge_method": "S256", "resource": s.resource, "redirect_uri": redirect,
		"scope": strings.Join([]string{scopeLog, scopeTasks, scopeTools}, " ")}
	for k, v := range want {
		if az[k] != v {
			t.Errorf("authorization request %s = %q, want %q", k, az[k], v)
		}
	}
	if len(az["code_challenge"]) != 43 {
		t.Errorf("code_challenge %q is not a base64url SHA-256", az["code_challenge"])
	}
	if !r.Connect.OK || !r.Call.OK {
		t.Fatalf("after signing in: connect %+v, call %+v, token claims %v", r.Connect, r.Call, r.TokenClaims)
	}
	if r.TokenClaims["sub"] != hydratest.User || r.TokenClaims["client_id"] != c.ID {
		t.Errorf("token claims %v; want sub %s, client_id %s", r.TokenClaims, hydratest.User, c.ID)
	}
	if logins, consents, refused := hy.Logins(); logins != 2 || consents != 2 || refused != 1 {
		t.Errorf("the login app accepted %d sign-ins and %d consents and refused %d sign-ins; want 2, 2 and 1", logins, consents, refused)
	}
	s.stop()
	n := 0
	for _, e := range readAll(t, s.data) {
		if e["kind"] != "call" {
			continue
		}
		auth, _ := e["auth"].(map[string]any)
		if e["actor"] != "hydra:"+hydratest.User || auth["client_id"] != c.ID || auth["sub"] != hydratest.User || auth["iss"] != hy.Issuer {
			t.Errorf("call entry: actor %v, auth %v; want hydra:%s through %s", e["actor"], auth, hydratest.User, c.ID)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d call entries; want 1 (the refused run wrote none)", n)
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
	checkAuthEntries(t, readAll(t, s.data), tok.AccessToken, "hydra:client:"+client.ID, created["task_id"].(string), nil, "call", "task.create")
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
		if e["actor"] != "hydra:client:opaque-bot" || auth["via"] != "introspection" || auth["iss"] != hy.Issuer ||
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

// TestOAuthHydraHandoff: a bot with its own Hydra token hands a task to
// hydra:alice, the actor Hydra's delegated tokens for alice map to; her
// agent accepts it with such a token, and the acceptance names alice as
// owner and the agent in its act chain.
func TestOAuthHydraHandoff(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	botTok := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	alice := hy.TrustDelegator(t, "alice", allScopes...)
	agent := hy.CreateClient(t, hydratest.Client{ID: "review-agent", Scopes: allScopes, Audience: []string{s.resource},
		GrantTypes: []string{hydratest.JWTBearerGrant}, Act: true})
	agentTok := mint(t)(hy.JWTBearer(ctx, agent, alice.Assertion(t), s.resource, allScopes...))

	cs := connectHTTP(t, s.base, botTok)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "review the release"})
	id, _ := created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": id})
	callTool(t, cs, "handoff_task", map[string]any{"task_id": id, "to": "hydra:alice"})
	cs.Close()
	cs = connectHTTP(t, s.base, agentTok)
	accepted, _ := callTool(t, cs, "accept_task", map[string]any{"task_id": id})
	cs.Close()
	if b, _ := json.Marshal(accepted); !strings.Contains(string(b), `"owner":"hydra:alice"`) {
		t.Errorf("accepted by alice's agent: %s", b)
	}
	s.stop()

	var kinds []string
	for _, e := range readAll(t, s.data) {
		if e["task_id"] != id {
			continue
		}
		auth, _ := e["auth"].(map[string]any)
		act, _ := json.Marshal(auth["act"])
		kinds = append(kinds, fmt.Sprintf("%s by %s act %s", e["kind"], e["actor"], act))
		if e["kind"] == "task.handoff" && e["to"] != "hydra:alice" {
			t.Errorf("handoff entry: %v", e)
		}
	}
	want := []string{"task.create by hydra:client:ci-bot act null", "task.accept by hydra:client:ci-bot act null",
		"task.handoff by hydra:client:ci-bot act null", `task.accept by hydra:alice act {"sub":"review-agent"}`}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Errorf("the task's entries:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
}

// TestOAuthHydraClientIsNoPerson: a client's own token (client
// credentials: its sub is its client id) acts in the issuer's client
// namespace, hydra:client:<id>, so a client registered as "alice" cannot
// take the task handed to the person hydra:alice (RFC 9068 §5: a client's
// sub may be a resource owner's).
func TestOAuthHydraClientIsNoPerson(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	botTok := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))

	// The bot hands a task to the person alice (her delegated tokens map
	// to hydra:alice, TestOAuthHydraHandoff).
	cs := connectHTTP(t, s.base, botTok)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "approve the payroll run"})
	id, _ := created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": id})
	callTool(t, cs, "handoff_task", map[string]any{"task_id": id, "to": "hydra:alice"})
	cs.Close()

	// A client that happens to be called "alice", with no person behind
	// its token.
	client := hy.CreateClient(t, hydratest.Client{ID: "alice", Scopes: allScopes, Audience: []string{s.resource}})
	clientTok := mint(t)(hy.ClientCredentials(ctx, client, s.resource, allScopes...))
	cs = connectHTTP(t, s.base, clientTok)
	res, err := cs.CallTool(ctx, toolParams("accept_task", map[string]any{"task_id": id}))
	cs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if strings.Contains(string(b), `"owner":"hydra:alice"`) {
			t.Errorf("the client %q's own client-credentials token accepted the task handed to the person hydra:alice and owns it as her: %s", client.ID, b)
		} else {
			t.Errorf("the client's accept of alice's task was not refused: %s", b)
		}
	}
}

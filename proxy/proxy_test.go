package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// eventBound is how long TestReferenceServers waits for a notification
// that is sure to come. It only turns one that never comes into a failure
// rather than a hung test, so it is far above any delay a loaded machine
// adds.
const eventBound = 30 * time.Second

// TestReferenceServers runs one proxy in front of go-sdk's everything-server
// (stdio), npm's server-everything (stdio and streamable HTTP) and the
// fixture server, and drives it with go-sdk's client.
// TestReferenceServers runs every scenario through two fronts: a client
// in memory, served by the SDK's session machinery, and a client over
// streamable HTTP, whose plain tools/calls take the fast path (httpfront.go) —
// to the stdio servers through the SDK's client, to the HTTP servers (evh,
// goh) as raw POSTs.
func TestReferenceServers(t *testing.T) {
	for _, front := range []string{"memory", "http"} {
		t.Run(front, func(t *testing.T) { testReferenceServers(t, front) })
	}
}

func testReferenceServers(t *testing.T, front string) {
	l := newTestLog(t)
	evURL := startEverythingHTTP(t)
	goCfg := ServerConfig{ID: "go", Command: []string{goEverything(t)}, Retain: RetainFull}
	gohCfg := ServerConfig{ID: "goh", URL: startGoEverythingHTTP(t)}
	evCfg := ServerConfig{ID: "ev", Command: everythingJS(t, "stdio"), Redact: []string{"token"}}
	evhCfg := ServerConfig{ID: "evh", URL: evURL, Redact: []string{"token"}}
	fxCfg := fixtureServerConfig(t, "fx")
	fxCfg.Redact = []string{"password"}
	fxCfg.Timeout = 500 * time.Millisecond
	p := startProxy(t, l, []ServerConfig{goCfg, gohCfg, evCfg, evhCfg, fxCfg}, nil)
	cl := newClientLog()
	var cs *mcp.ClientSession
	wantActor, wantClient, wantVersion := "test-actor", "go-test-client", "9.9.9"
	if front == "http" {
		cs = fastSession(t, p, connectHTTP(t, serveHTTP(t, p), "2025-11-25", cl))
		wantActor, wantClient, wantVersion = testActor, "go-http-client", "1.2.3"
	} else {
		cs = connectMemory(t, p, cl)
	}
	ctx := context.Background()
	// fastCalls checks that f made want calls on the fast path: the HTTP
	// client's plain calls to downstream tools take it, nothing else does.
	fastCalls := func(t *testing.T, want uint64, f func()) {
		t.Helper()
		before := p.fastCalls.Load()
		f()
		if front != "http" {
			want = 0
		}
		if got := p.fastCalls.Load() - before; got != want {
			t.Errorf("%d calls took the fast path, want %d", got, want)
		}
	}
	t.Cleanup(func() {
		n := p.fastCalls.Load()
		if front == "memory" && n != 0 {
			t.Errorf("%d calls took the fast path from a client in memory", n)
		}
		t.Logf("%s front: %d calls on the fast path", front, n)
	})

	t.Run("ToolsAsTheServersListThem", func(t *testing.T) {
		got := frontTools(t, cs)
		for _, cfg := range []ServerConfig{goCfg, gohCfg, evCfg, evhCfg} {
			// Some servers add tools once initialized; compare once both
			// sides have settled.
			var want map[string]json.RawMessage
			deadline := time.Now().Add(10 * time.Second)
			for {
				want = directTools(t, cfg)
				got = frontTools(t, cs)
				if diff := compareTools(cfg.ID, want, got); diff == "" {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("server %s: %s", cfg.ID, diff)
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Logf("server %s: %d tools, schemas identical", cfg.ID, len(want))
		}
		for _, own := range []string{toolStatus, toolVerify} {
			if _, ok := got[own]; !ok {
				t.Errorf("%s missing", own)
			}
		}
	})

	for _, srv := range []ServerConfig{evCfg, evhCfg} {
		t.Run("CallRecordedWithRedactedArgs/"+srv.ID, func(t *testing.T) {
			before := l.size(t)
			args := map[string]any{"message": "hello <&>", "extra": []any{map[string]any{"token": "hunter2-secret"}}, "token": 12345}
			var res *mcp.CallToolResult
			var err error
			fastCalls(t, 1, func() { res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: srv.ID + "__echo", Arguments: args}) })
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || !strings.Contains(textOf(res), "hello <&>") {
				t.Fatalf("echo result: %s", mustJSON(res))
			}
			e, b := l.checkReceipt(t, metaReceipt(res.Meta))
			if l.size(t) != before+2 {
				t.Errorf("log grew by %d entries, want 2 (call, call.result)", l.size(t)-before)
			}
			if bytes.Contains(b, []byte("hunter2")) || bytes.Contains(b, []byte("12345")) {
				t.Fatalf("a redacted value reached the log: %s", b)
			}
			wantArgs := `{"extra":[{"token":"[redacted]"}],"message":"hello <&>","token":"[redacted]"}`
			if got := mustJSON(e.Fields["args"]); got != wantArgs {
				t.Errorf("args = %s, want %s", got, wantArgs)
			}
			if e.Actor != wantActor || e.Fields["server"] != srv.ID || e.Fields["tool"] != "echo" || e.Fields["is_error"] != false {
				t.Errorf("entry = %s", b)
			}
			if c, _ := e.Fields["client"].(map[string]any); c["name"] != wantClient || c["version"] != wantVersion {
				t.Errorf("client = %v", e.Fields["client"])
			}
			if e.Fields["protocol_version"] != "2025-11-25" {
				t.Errorf("protocol_version = %v", e.Fields["protocol_version"])
			}
			if _, ok := e.Fields["duration_ns"]; !ok {
				t.Error("no duration_ns")
			}
			if s, _ := e.Fields["started"].(string); s != e.Time.UTC().Format(log.TimeFormat) {
				t.Errorf("started %q, time %v", s, e.Time)
			}
			// The result hash is that of the result as the server sends it:
			// ask the server directly, with the same arguments.
			raw := directCall(t, srv, "echo", args)
			canon, err := log.Canonicalize(raw)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(canon)
			if e.Fields["result_sha256"] != hex.EncodeToString(sum[:]) {
				t.Errorf("result_sha256 = %v, want %x (of %s)", e.Fields["result_sha256"], sum, canon)
			}
			if n, _ := e.Fields["result_bytes"].(json.Number); n.String() != strconv.Itoa(len(raw)) {
				t.Errorf("result_bytes = %v, want %d", e.Fields["result_bytes"], len(raw))
			}
		})

	}

	t.Run("RetainFullKeepsTheResult", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_simple_text"})
		if err != nil || res.IsError {
			t.Fatalf("%v %v", err, mustJSON(res))
		}
		e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
		sum, _ := e.Fields["result_sha256"].(string)
		blob, err := l.blobs.Get(sum)
		if err != nil {
			t.Fatalf("retained result: %v", err)
		}
		if !isCanonical(blob) || !bytes.Contains(blob, []byte(textOf(res))) {
			t.Errorf("blob %s is not the canonical result", blob)
		}
		if e.Fields["result_retained"] != true {
			t.Errorf("result_retained = %v", e.Fields["result_retained"])
		}
	})

	seen := map[string]bool{} // the progress tokens of the calls so far
	for _, tc := range []struct{ name, tool string }{
		{"GoServer", "go__test_tool_with_progress"},
		{"EverythingStdio", "ev__trigger-long-running-operation"},
		{"EverythingHTTP", "evh__trigger-long-running-operation"},
	} {
		t.Run("Progress/"+tc.name, func(t *testing.T) {
			seen["tok-"+tc.name] = true
			for len(cl.progress) > 0 {
				<-cl.progress
			}
			params := &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"duration": 1, "steps": 4}}
			params.SetProgressToken("tok-" + tc.name)
			var res *mcp.CallToolResult
			var err error
			fastCalls(t, 0, func() { res, err = cs.CallTool(ctx, params) }) // progress needs the SDK's streams
			if err != nil || res.IsError {
				t.Fatalf("%v %s", err, mustJSON(res))
			}
			l.checkReceipt(t, metaReceipt(res.Meta))
			var got []float64
			timeout := time.After(eventBound)
		collect:
			for {
				select {
				case pn := <-cl.progress:
					if tok, _ := pn.ProgressToken.(string); tok != "tok-"+tc.name && strings.HasPrefix(tok, "tok-") && seen[tok] {
						continue // an earlier call's late progress, under its own token
					}
					if pn.ProgressToken != "tok-"+tc.name {
						t.Fatalf("progress token %v, want %q", pn.ProgressToken, "tok-"+tc.name)
					}
					got = append(got, pn.Progress)
				case <-timeout:
					break collect
				}
				if len(got) >= 2 {
					break
				}
			}
			if len(got) < 2 {
				t.Fatalf("got %d progress notifications, want at least 2", len(got))
			}
		})
	}

	t.Run("ToolErrorVersusProtocolError", func(t *testing.T) {
		// A tool error is a result, recorded as is_error.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_error_handling"})
		if err != nil || !res.IsError {
			t.Fatalf("want a tool error: %v %s", err, mustJSON(res))
		}
		e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
		if e.Fields["is_error"] != true || e.Fields["error"] != nil || e.Fields["result_sha256"] == nil {
			t.Errorf("tool error entry: %v", e.Fields)
		}

		// An unknown tool is the proxy's protocol error: nothing recorded.
		before := l.size(t)
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope__missing"})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("unknown tool: %v", err)
		}
		if l.size(t) != before {
			t.Error("a call to an unknown tool was recorded")
		}

		// A downstream protocol error reaches the client verbatim (code,
		// message, data) and is recorded, scrubbed of redacted values.
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__fail_protocol", Arguments: map[string]any{"password": "pa55word-xyz"}})
		if !errors.As(err, &we) || we.Code != -32001 || !strings.Contains(we.Message, "pa55word-xyz") || string(we.Data) != `{"detail":"from the fixture"}` {
			t.Fatalf("downstream protocol error: %#v", err)
		}
		e, b := l.callAt(t, before)
		if bytes.Contains(b, []byte("pa55word")) {
			t.Fatalf("the redacted password reached the log: %s", b)
		}
		if e.Fields["error"] != "login refused for password [redacted]" || e.Fields["error_code"] != json.Number("-32001") || e.Fields["is_error"] != true {
			t.Errorf("protocol error entry: %s", b)
		}
	})

	t.Run("SchemasTheSDKRejectsAreSkipped", func(t *testing.T) {
		got := frontTools(t, cs)
		for _, bad := range []string{"fx__bad_schema", "fx__bad_header"} {
			if _, ok := got[bad]; ok {
				t.Errorf("%s is served", bad)
			}
		}
		if _, ok := got["fx__ok"]; !ok {
			t.Error("fx__ok is not served")
		}
		st := callStatus(t, cs)
		fx := serverStatus(t, st, "fx")
		skipped, _ := fx["skipped_tools"].(map[string]any)
		if skipped["bad_schema"] == nil || skipped["bad_header"] == nil {
			t.Errorf("status does not report the skipped tools: %v", fx)
		}
	})

	t.Run("Cancellation", func(t *testing.T) {
		before := l.size(t)
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "ev__trigger-long-running-operation", Arguments: map[string]any{"duration": 20, "steps": 20}})
		if err == nil {
			t.Fatal("a cancelled call succeeded")
		}
		e, _ := l.callAt(t, before)
		if e.Fields["error"] != "cancelled by the client" || e.Fields["is_error"] != true {
			t.Errorf("cancelled call entry: %v", e.Fields)
		}
		// The server is fine afterwards.
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-sum", Arguments: map[string]any{"a": 2, "b": 3}}); err != nil || !strings.Contains(textOf(res), "5") {
			t.Fatalf("after cancelling: %v %s", err, mustJSON(res))
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		// The server's 500ms is what ends the call, as its error says; the
		// client's bound only turns a timeout that never fires into a
		// failure rather than a hung test.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "fx__hang"})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || !strings.Contains(we.Message, "did not answer hang within 500ms") {
			t.Fatalf("hanging call: %v", err)
		}
		var data map[string]string
		json.Unmarshal(we.Data, &data)
		e, _ := l.checkReceipt(t, data[ReceiptKey])
		if e.Fields["is_error"] != true || !strings.Contains(e.Fields["error"].(string), "did not answer") {
			t.Errorf("timed out call entry: %v", e.Fields)
		}
	})

	t.Run("SamplingAndElicitationReachTheClient", func(t *testing.T) {
		before := p.fastCalls.Load()
		defer func() {
			if got := p.fastCalls.Load() - before; front == "http" && got != 6 {
				t.Errorf("%d calls took the fast path, want 6", got)
			}
		}()
		for _, srv := range []string{"go", "goh"} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: srv + "__test_sampling", Arguments: map[string]any{"prompt": "hi"}})
			if err != nil || !strings.Contains(textOf(res), "sampled by the test client") {
				t.Fatalf("sampling (%s): %v %s", srv, err, mustJSON(res))
			}
			l.checkReceipt(t, metaReceipt(res.Meta))
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: srv + "__test_elicitation", Arguments: map[string]any{"message": "who?"}})
			if err != nil || !strings.Contains(textOf(res), "action=accept") || !strings.Contains(textOf(res), "tester") {
				t.Fatalf("elicitation (%s): %v %s", srv, err, mustJSON(res))
			}
		}
		for _, srv := range []string{"ev", "evh"} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: srv + "__trigger-sampling-request", Arguments: map[string]any{"prompt": "hi", "maxTokens": 10}})
			if err != nil || !strings.Contains(textOf(res), "sampled by the test client") {
				t.Fatalf("sampling (server-everything, %s): %v %s", srv, err, mustJSON(res))
			}
		}
	})

	t.Run("Logging", func(t *testing.T) {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		for _, srv := range []string{"go", "goh"} {
			for len(cl.logs) > 0 {
				<-cl.logs
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: srv + "__test_tool_with_logging"}); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-cl.logs:
				if m.Logger != srv || m.Level != "info" {
					t.Errorf("log message %s", mustJSON(m))
				}
			case <-time.After(eventBound):
				t.Fatalf("no log message from %s reached the client", srv)
			}
		}
	})

	t.Run("ListChanged", func(t *testing.T) {
		// trigger has the server change its tools, and waits for the
		// client to hear of it.
		trigger := func(missing string) {
			for len(cl.toolChanges) > 0 {
				<-cl.toolChanges
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_trigger_tool_change"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-cl.toolChanges:
			case <-time.After(eventBound):
				t.Fatal(missing)
			}
		}
		trigger("no tools/list_changed reached the client")
		deadline := time.Now().Add(eventBound)
		for {
			if _, ok := frontTools(t, cs)["go____transient_tool_for_list_changed"]; ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the new tool is not listed")
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The server announces a change again though its tools stay the
		// same (it re-adds the same tool): the client hears it, as it
		// would from the server directly (conformance's server-stateless).
		trigger("the server's second tools/list_changed, with no change to see, did not reach the client")
	})

	t.Run("ResourcesAndPrompts", func(t *testing.T) {
		var uris []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, r.URI)
		}
		if !slices.Contains(uris, "go+test://static-text") {
			t.Fatalf("resources: %v", uris)
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "go+test://static-text"})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].URI != "go+test://static-text" || !strings.Contains(rr.Contents[0].Text, "static text") {
			t.Fatalf("read: %v %s", err, mustJSON(rr))
		}
		rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "go+test://template/42/data"})
		if err != nil || !strings.Contains(rr.Contents[0].Text, "42") {
			t.Fatalf("read from a template: %v %s", err, mustJSON(rr))
		}
		var tmpls []string
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			tmpls = append(tmpls, rt.URITemplate)
		}
		if !slices.Contains(tmpls, "go+test://template/{id}/data") {
			t.Errorf("templates: %v", tmpls)
		}
		gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "go__test_prompt_with_arguments", Arguments: map[string]string{"arg1": "alpha", "arg2": "beta"}})
		if err != nil || !strings.Contains(mustJSON(gp), "alpha") {
			t.Fatalf("prompt: %v %s", err, mustJSON(gp))
		}
		// A prompt's embedded resource gets its front URI, rewritten in the
		// bytes the server sent; the prompt.get entry hashes those as sent.
		gp, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "go__test_prompt_with_embedded_resource", Arguments: map[string]string{"resourceUri": "test://static-text"}})
		var embedded *mcp.EmbeddedResource
		if err == nil {
			for _, m := range gp.Messages {
				if e, ok := m.Content.(*mcp.EmbeddedResource); ok {
					embedded = e
				}
			}
		}
		if err != nil || embedded == nil || embedded.Resource == nil || embedded.Resource.URI != "go+test://static-text" {
			t.Fatalf("prompt with an embedded resource: %v %s", err, mustJSON(gp))
		}
		if pe := l.readReceipt(t, gp.Meta, log.KindPromptGet); pe.Prompt != "test_prompt_with_embedded_resource" {
			t.Errorf("the prompt's receipt names the prompt.get of %q", pe.Prompt)
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "ev__simple-prompt"}); err != nil {
			t.Errorf("server-everything prompt: %v", err)
		}
	})

	t.Run("BigArgumentsGoToABlob", func(t *testing.T) {
		args := map[string]any{"ms": 1, "password": "big-secret-1", "pad": strings.Repeat("é", 40000)}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__sleep", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%v %s", err, mustJSON(res))
		}
		e, b := l.checkReceipt(t, metaReceipt(res.Meta))
		sum, _ := e.Fields["args_sha256"].(string)
		if _, ok := e.Fields["args"]; ok || sum == "" {
			t.Fatalf("entry of %d bytes keeps its args: %.300s", len(b), b)
		}
		blob, err := l.blobs.Get(sum)
		if err != nil {
			t.Fatal(err)
		}
		if !isCanonical(blob) || bytes.Contains(blob, []byte("big-secret")) || !bytes.Contains(blob, []byte(`"password":"[redacted]"`)) {
			t.Errorf("args blob is not the canonical redacted args: %.200s", blob)
		}
	})

	t.Run("StatusAndVerify", func(t *testing.T) {
		before := l.size(t)
		st := callStatus(t, cs)
		for _, id := range []string{"go", "goh", "ev", "evh", "fx"} {
			if s := serverStatus(t, st, id); s["state"] != StateUp {
				t.Errorf("server %s: %v", id, s)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
		if err != nil {
			t.Fatal(err)
		}
		l.checkReceipt(t, metaReceipt(res.Meta))
		r, _ := log.ParseReceipt([]byte(metaReceipt(res.Meta)))
		entry := l.entry(t, r.Index) // the call.result the receipt proves
		vres, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolVerify, Arguments: map[string]any{"receipt": metaReceipt(res.Meta), "entry": string(entry)}})
		if err != nil || vres.IsError {
			t.Fatalf("verify: %v %s", err, mustJSON(vres))
		}
		if v, _ := vres.StructuredContent.(map[string]any); v["valid"] != true {
			t.Errorf("verify: %s", mustJSON(vres))
		}
		vres, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: toolVerify, Arguments: map[string]any{"receipt": metaReceipt(res.Meta), "entry": string(entry) + " "}})
		if v, _ := vres.StructuredContent.(map[string]any); v["valid"] != false {
			t.Errorf("verify accepted another entry: %s", mustJSON(vres))
		}
		for _, args := range []map[string]any{{"index": r.Index}, {"leaf_hash": hex.EncodeToString(r.Extra)}} {
			pres, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolProve, Arguments: args})
			if err != nil || pres.IsError {
				t.Fatalf("prove %v: %v %s", args, err, mustJSON(pres))
			}
			m, _ := pres.StructuredContent.(map[string]any)
			text, _ := m["receipt"].(string)
			if pr, err := log.ParseReceipt([]byte(text)); err != nil || pr.Index != r.Index {
				t.Fatalf("prove %v: %v %s", args, err, text)
			} else if _, err := pr.Verify(log.LeafHash(entry), l.verifier); err != nil {
				t.Errorf("proved receipt: %v", err)
			}
		}
		if m, _ := st["log"].(map[string]any); m["size"] == nil {
			t.Errorf("status lacks the log's state: %v", st)
		}
		if got := l.size(t); got != before+2 {
			t.Errorf("the proxy's own tools were recorded: log grew by %d", got-before)
		}
	})
}

func callStatus(t *testing.T, cs *mcp.ClientSession) map[string]any {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolStatus})
	if err != nil || res.IsError {
		t.Fatalf("status: %v %s", err, mustJSON(res))
	}
	m, _ := res.StructuredContent.(map[string]any)
	return m
}

func serverStatus(t *testing.T, st map[string]any, id string) map[string]any {
	t.Helper()
	list, _ := st["servers"].([]any)
	for _, s := range list {
		if m, _ := s.(map[string]any); m["id"] == id {
			return m
		}
	}
	t.Fatalf("status has no server %q: %v", id, st)
	return nil
}

// frontTools lists the proxy's tools as they come over the wire.
func frontTools(t *testing.T, cs *mcp.ClientSession) map[string]json.RawMessage {
	t.Helper()
	raws, err := toolKind().list(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return byName(t, raws)
}

func byName(t *testing.T, raws []json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, r := range raws {
		var n struct{ Name string }
		if err := json.Unmarshal(r, &n); err != nil {
			t.Fatal(err)
		}
		out[n.Name] = r
	}
	return out
}

// directClient connects to a server the way the proxy does, without the
// proxy.
func directClient(t *testing.T, cfg ServerConfig) *mcp.ClientSession {
	t.Helper()
	d := newDownstream(&Proxy{opts: Options{Version: "test"}, logger: testLogger(t)}, cfg)
	cs, cmd, err := d.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); killProcessGroup(cmd) })
	return cs
}

func directTools(t *testing.T, cfg ServerConfig) map[string]json.RawMessage {
	cs := directClient(t, cfg)
	time.Sleep(300 * time.Millisecond) // servers that add tools once initialized
	raws, err := toolKind().list(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return byName(t, raws)
}

func directCall(t *testing.T, cfg ServerConfig, tool string, args any) json.RawMessage {
	cs := directClient(t, cfg)
	cp := &capture{}
	if _, err := cs.CallTool(withCapture(context.Background(), cp), &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
		t.Fatal(err)
	}
	return cp.last()
}

// compareTools reports how the proxy's tools differ from a server's own:
// every server tool under its front name, with byte-identical schemas (up
// to whitespace), and no other tools of that server.
func compareTools(id string, want, got map[string]json.RawMessage) string {
	var diffs []string
	for name, w := range want {
		g, ok := got[id+"__"+name]
		if !ok {
			diffs = append(diffs, "missing "+name)
			continue
		}
		for _, field := range []string{"inputSchema", "outputSchema"} {
			ws, gs := field2(w, field), field2(g, field)
			if !bytes.Equal(ws, gs) {
				diffs = append(diffs, name+" "+field+": server "+string(ws)+" proxy "+string(gs))
			}
		}
	}
	for name := range got {
		if rest, ok := strings.CutPrefix(name, id+"__"); ok {
			if _, ok := want[rest]; !ok {
				diffs = append(diffs, "extra "+name)
			}
		}
	}
	return strings.Join(diffs, "; ")
}

func field2(raw json.RawMessage, field string) []byte {
	var m map[string]json.RawMessage
	json.Unmarshal(raw, &m)
	var b bytes.Buffer
	if len(m[field]) > 0 {
		json.Compact(&b, m[field])
	}
	return b.Bytes()
}

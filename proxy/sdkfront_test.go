package proxy

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oddResult is a tools/call result with members the SDK's types do not
// have, which a client must still get.
const oddResult = `{"zeta":1,"content":[{"type":"text","text":"hi","x-extra":{"b":2,"a":1}}],"isError":false}`

// checkOddResult checks that result holds every member of oddResult,
// beside the receipt.
func checkOddResult(t *testing.T, how string, result json.RawMessage) {
	t.Helper()
	var got, want map[string]any
	if err := json.Unmarshal(result, &got); err != nil {
		t.Fatalf("%s: result %s: %v", how, result, err)
	}
	json.Unmarshal([]byte(oddResult), &want)
	meta, _ := got["_meta"].(map[string]any)
	if r, _ := meta[ReceiptKey].(string); r == "" {
		t.Errorf("%s: result %s has no receipt", how, result)
	}
	delete(got, "_meta")
	delete(got, "resultType") // 2026-07-28's, which the SDK adds to a complete result
	if g, w := mustJSON(got), mustJSON(want); g != w {
		t.Errorf("%s: the client got %s, want the server's %s", how, g, w)
	}
}

// TestSDKFrontVerbatim: the calls the SDK's server serves (the stateless
// 2026-07-28 revision over HTTP, a call with a progress token on any
// front) give the client the server's result, not the SDK's decoding of
// it: members its types lack stay.
func TestSDKFrontVerbatim(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: wireDownstream(t, oddResult)}}, nil)
	url := serveHTTP(t, p)

	// A plain call the HTTP front serves itself; one with a progress
	// token or a log level goes through the SDK's stateless handler.
	for _, c := range []struct {
		name, meta string
		fast       uint64
	}{{"stateless", statelessMeta, 1}, {"stateless via the SDK", strings.Replace(statelessMeta, `"_meta":{`, `"_meta":{"progressToken":"pt",`, 1), 0},
		{"stateless with a log level, via the SDK", strings.Replace(statelessMeta, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"info",`, 1), 0}} {
		t.Run(c.name, func(t *testing.T) {
			before, at := p.statelessCalls.Load(), l.size(t)
			body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"x"}` + c.meta + `}}`
			resp, text := postMCP(t, url, body, map[string]string{"Authorization": "Bearer " + testToken,
				"Mcp-Protocol-Version": statelessProtocol, "Mcp-Method": "tools/call", "Mcp-Name": "e__echo"})
			if resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Status, text)
			}
			if i := strings.Index(text, "data: "); strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && i >= 0 {
				text, _, _ = strings.Cut(text[i+len("data: "):], "\n")
			}
			var m struct {
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal([]byte(text), &m); err != nil {
				t.Fatalf("answer %q: %v", text, err)
			}
			checkOddResult(t, c.name, m.Result)
			if !strings.Contains(string(m.Result), `"resultType":"complete"`) {
				t.Errorf("a 2026-07-28 result without resultType \"complete\": %s", m.Result)
			}
			if n := p.statelessCalls.Load() - before; n != c.fast {
				t.Errorf("the HTTP front served %d of the call itself, want %d", n, c.fast)
			}
			// The call entry names the client and revision from the _meta,
			// and the actor from the token, as the SDK's route has them.
			e, raw := l.callAt(t, at)
			if e.Actor != testActor || !strings.Contains(string(raw), `"protocol_version":"2026-07-28"`) || !strings.Contains(string(raw), `{"name":"x","version":"1"}`) {
				t.Errorf("the call's entries: %s", raw)
			}
		})
	}

	t.Run("progress token", func(t *testing.T) {
		pc := newPipeClient(t, p)
		pc.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"x"},"_meta":{"progressToken":"pt"}}}`)
		var m struct {
			Result json.RawMessage `json:"result"`
		}
		if got := pc.read(); json.Unmarshal(got, &m) != nil {
			t.Fatalf("answer %s", got)
		}
		checkOddResult(t, "progress-token call on stdio", m.Result)
		if n := p.pipeCalls.Load(); n != 0 {
			t.Errorf("the pipe front served %d calls itself; this test is of the SDK's route", n)
		}
	})
}

// TestSDKFrontReadsVerbatim: resources/read and prompts/get, which the
// SDK's server routes, give the client the server's result with the
// receipt (and front URIs), members the SDK's types lack included.
func TestSDKFrontReadsVerbatim(t *testing.T) {
	l := newTestLog(t)
	down := wireDownstreamOf(t, map[string]string{
		"resources/read": `{"zeta":1,"contents":[{"uri":"wire:///r","text":"hi","x-extra":{"b":2}}]}`,
		"prompts/get":    `{"zeta":2,"messages":[{"role":"user","content":{"type":"text","text":"hi","x-extra":{"b":2}}}]}`,
	})
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: down}}, nil)
	pc := newPipeClient(t, p)
	for _, c := range []struct{ req, want string }{
		{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"e+wire:///r"}}`,
			`{"contents":[{"text":"hi","uri":"e+wire:///r","x-extra":{"b":2}}],"zeta":1}`},
		{`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"e__p"}}`,
			`{"messages":[{"content":{"text":"hi","type":"text","x-extra":{"b":2}},"role":"user"}],"zeta":2}`},
	} {
		pc.send(c.req)
		var m struct {
			Result map[string]any `json:"result"`
		}
		got := pc.read()
		if json.Unmarshal(got, &m) != nil || m.Result == nil {
			t.Fatalf("%s: answer %s", c.req, got)
		}
		meta, _ := m.Result["_meta"].(map[string]any)
		if r, _ := meta[ReceiptKey].(string); r == "" {
			t.Errorf("%s: no receipt in %s", c.req, got)
		}
		delete(m.Result, "_meta")
		if g := mustJSON(m.Result); g != c.want {
			t.Errorf("%s: the client got %s, want %s", c.req, g, c.want)
		}
	}
}

// TestFastStatelessLeavesTheRestToTheSDK: a 2026-07-28 tools/call whose
// headers or _meta the SDK's handler would refuse is not served by the
// HTTP front itself; the SDK answers it, with its error and status.
func TestFastStatelessLeavesTheRestToTheSDK(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: wireDownstream(t, oddResult)}}, nil)
	url := serveHTTP(t, p)
	call := func(meta string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"x"}` + meta + `}}`
	}
	headers := func(drop string, set ...string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Protocol-Version": statelessProtocol, "Mcp-Method": "tools/call", "Mcp-Name": "e__echo"}
		delete(h, drop)
		for i := 0; i+1 < len(set); i += 2 {
			h[set[i]] = set[i+1]
		}
		return h
	}
	for _, c := range []struct {
		name   string
		body   string
		header map[string]string
	}{
		{"no Mcp-Name", call(statelessMeta), headers("Mcp-Name")},
		{"another Mcp-Name", call(statelessMeta), headers("", "Mcp-Name", "e__other")},
		{"no Mcp-Method", call(statelessMeta), headers("Mcp-Method")},
		{"_meta of another revision", call(strings.Replace(statelessMeta, "2026-07-28", "2025-11-25", 1)), headers("")},
		{"no clientCapabilities", call(`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"}}`), headers("")},
		{"clientInfo not an object", call(strings.Replace(statelessMeta, `{"name":"x","version":"1"}`, `"x"`, 1)), headers("")},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, at := p.statelessCalls.Load(), l.size(t)
			resp, text := postMCP(t, url, c.body, c.header)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s, want the SDK's 400", resp.Status, text)
			}
			if n := p.statelessCalls.Load() - before; n != 0 {
				t.Errorf("the HTTP front served it itself")
			}
			if n := l.size(t) - at; n != 0 {
				t.Errorf("a refused request wrote %d entries", n)
			}
		})
	}
}

// TestPipeFrontSessionless: on stdio, a 2026-07-28 client's plain call
// (no initialize; the revision, clientInfo and capabilities in its
// _meta) is served by the pipe front itself, with the server's result,
// resultType and the receipt, and recorded with that client and
// revision; one whose _meta lacks the capabilities goes to the SDK.
func TestPipeFrontSessionless(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: wireDownstream(t, oddResult)}}, nil)
	pc := connectPipeClient(t, p)
	at := l.size(t)
	pc.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"x"}` + statelessMeta + `}}`)
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if got := pc.read(); json.Unmarshal(got, &m) != nil || m.Result == nil {
		t.Fatalf("answer %s", got)
	}
	checkOddResult(t, "sessionless stdio", m.Result)
	if !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Errorf("a 2026-07-28 result without resultType \"complete\": %s", m.Result)
	}
	if n := p.pipeCalls.Load(); n != 1 {
		t.Errorf("the pipe front served %d calls itself, want 1", n)
	}
	if e, raw := l.callAt(t, at); e.Actor == "" || !strings.Contains(string(raw), `"protocol_version":"2026-07-28"`) || !strings.Contains(string(raw), `{"name":"x","version":"1"}`) {
		t.Errorf("the call's entries: %s", raw)
	}

	pc.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"e__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if got := pc.read(); json.Unmarshal(got, &m) != nil || m.Error == nil {
		t.Errorf("a call without clientCapabilities: %s, want the SDK's error", got)
	}
	if n := p.pipeCalls.Load(); n != 1 {
		t.Errorf("the pipe front served %d calls itself, want 1", n)
	}
}

// TestSessionlessSDKClient: go-sdk's own client, speaking 2026-07-28
// (its default) on stdio and over HTTP, has its plain calls served by
// the pipe front and the HTTP front themselves.
func TestSessionlessSDKClient(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: wireDownstream(t, oddResult)}}, nil)
	cp, sp := net.Pipe()
	ss, err := p.connectPipe(context.Background(), sp, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close(); ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "sdk-client", Version: "2"}, nil)
	stdio, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: cp, Writer: cp}, &mcp.ClientSessionOptions{ProtocolVersion: statelessProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	for _, f := range []struct {
		name   string
		cs     *mcp.ClientSession
		served *atomic.Uint64
	}{{"stdio", stdio, &p.pipeCalls}, {"HTTP", connectHTTP(t, serveHTTP(t, p), "", nil), &p.statelessCalls}} {
		if v := f.cs.InitializeResult().ProtocolVersion; v != statelessProtocol {
			t.Fatalf("%s: the session speaks %s", f.name, v)
		}
		for range 3 {
			res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "e__echo", Arguments: map[string]any{"message": "x"}})
			if err != nil || res.IsError || textOf(res) != "hi" {
				t.Fatalf("%s: call: %v %v", f.name, res, err)
			}
			if r, _ := res.Meta[ReceiptKey].(string); r == "" {
				t.Fatalf("%s: no receipt: %v", f.name, res.Meta)
			}
		}
		if n := f.served.Load(); n != 3 {
			t.Errorf("%s: the front served %d of 3 calls itself", f.name, n)
		}
	}
}

// TestSDKFrontListsVerbatim: the four lists give the client each
// downstream tool, prompt, resource and template as its server defined
// it (under its front name or URI), members the SDK's types lack
// included, and the proxy's own tools beside them.
func TestSDKFrontListsVerbatim(t *testing.T) {
	l := newTestLog(t)
	down := wireDownstreamOf(t, map[string]string{
		"tools/list":               `{"tools":[{"name":"echo","description":"d","inputSchema":{"type":"object","x-s":1},"x-vendor":{"b":2,"a":1}}]}`,
		"prompts/list":             `{"prompts":[{"name":"p","description":"q","x-vendor":[1]}]}`,
		"resources/list":           `{"resources":[{"uri":"wire:///r","name":"r","x-vendor":3}]}`,
		"resources/templates/list": `{"resourceTemplates":[{"uriTemplate":"wire:///t/{x}","name":"t","x-vendor":4}]}`,
	})
	p := startProxy(t, l, []ServerConfig{{ID: "e", URL: down}}, nil)
	pc := newPipeClient(t, p)
	for _, c := range []struct{ method, key, nameKey, name, want string }{
		{"tools/list", "tools", "name", "e__echo", `{"description":"d","inputSchema":{"type":"object","x-s":1},"name":"e__echo","x-vendor":{"a":1,"b":2}}`},
		{"prompts/list", "prompts", "name", "e__p", `{"description":"q","name":"e__p","x-vendor":[1]}`},
		{"resources/list", "resources", "uri", "e+wire:///r", `{"name":"r","uri":"e+wire:///r","x-vendor":3}`},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", "e+wire:///t/{x}", `{"name":"t","uriTemplate":"e+wire:///t/{x}","x-vendor":4}`},
	} {
		pc.send(`{"jsonrpc":"2.0","id":2,"method":"` + c.method + `"}`)
		var m struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		var items []map[string]any
		got := pc.read()
		if json.Unmarshal(got, &m) != nil || json.Unmarshal(m.Result[c.key], &items) != nil {
			t.Fatalf("%s: answer %s", c.method, got)
		}
		var item map[string]any
		for _, it := range items {
			if it[c.nameKey] == c.name {
				item = it
			}
		}
		if g := mustJSON(item); g != c.want {
			t.Errorf("%s: %s listed as %s, want %s", c.method, c.name, g, c.want)
		}
		if c.key == "tools" && len(items) < 2 {
			t.Errorf("the tools list has %d tools, want the proxy's own too: %s", len(items), got)
		}
	}
}

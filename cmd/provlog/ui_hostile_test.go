package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/browser"
	"github.com/provlog/provlog/log"
)

// Strings an agent or a downstream server controls, each written so that
// markup, a template engine or a script would run it: the payloads set
// window.pwned and document.title, which the test reads back.
const (
	hostileImg    = `<img src=x onerror="window.pwned='img';document.title='pwned'">`
	hostileScript = `</script><script>window.pwned='script';document.title='pwned'</script>`
	hostileTmpl   = "{{constructor.constructor('window.pwned=1')()}} ${window.pwned=1}"
	hostileStyle  = `<style>body{display:none}</style><a href="javascript:window.pwned=1">x</a>`
	// A right-to-left override makes "report‮fdp.exe" read as
	// "reportexe.pdf"; a zero-width space makes "ad​min" look like "admin".
	hostileBidi = "report\u202Efdp.exe"
	hostileZW   = "ad\u200Bmin"
)

// hostileLog is a sidecar whose task and calls carry hostile strings: the
// task's title and claim, a call's arguments (markup, a javascript: URL,
// bidi and zero-width characters, a long string).
type hostileLog struct {
	base, token            string
	taskID                 string
	call, claim            uint64
	title, summary, target string
}

func newHostileLog(t *testing.T) *hostileLog {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "store"}, func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		return text(hostileImg + " stored"), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf("data: %s\norigin: provlog.example/hostile\nactor: alice\nservers:\n  - id: fs\n    url: %s\n", filepath.Join(dir, "data"), down.URL))
	sc := mustOpenSidecar(t, cfg)
	t.Cleanup(sc.close)
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := sc.proxy.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: hostileScript, Version: hostileImg}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	h := &hostileLog{title: hostileImg + hostileScript, summary: hostileTmpl + " " + hostileBidi + " " + hostileZW, target: "javascript:window.pwned=1"}
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": h.title, "description": hostileStyle})
	h.taskID = created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": h.taskID})
	index := func(name string, args map[string]any) uint64 {
		_, rc := callTool(t, cs, name, args)
		r, err := log.ParseReceipt([]byte(rc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r.Index
	}
	h.call = index("fs__store", map[string]any{"task_id": h.taskID, "uri": h.target, "markup": hostileImg + hostileScript + hostileStyle,
		"template": hostileTmpl, "file": hostileBidi, "user": hostileZW, "long": strings.Repeat("A", 8000)})
	h.call = callOf(t, ctx, sc, h.call)
	h.claim = index("report_completion", map[string]any{"task_id": h.taskID, "provenance": "observed", "summary": h.summary, "evidence": []uint64{h.call}})

	hs := httptest.NewServer(sc.handler())
	t.Cleanup(hs.Close)
	h.base = hs.URL
	tok, err := os.ReadFile(filepath.Join(cfg.Data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	h.token = strings.TrimSpace(string(tok))
	return h
}

// checkNoInjection fails t if a hostile string ran or became markup on
// the page now shown.
func checkNoInjection(t *testing.T, ctx context.Context, p *browser.Page, what string) {
	t.Helper()
	var got struct {
		Pwned   string   `json:"pwned"`
		Title   string   `json:"title"`
		Foreign []string `json:"foreign"`
	}
	err := p.Eval(ctx, `({pwned: String(window.pwned), title: document.title,
		foreign: [...document.querySelectorAll("img, iframe, object, embed, style, main script, main a:not([href^='#'])")].map(e => e.outerHTML)})`, &got)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pwned != "undefined" || got.Title != "provlog — auditor's view" || len(got.Foreign) > 0 {
		t.Errorf("%s: window.pwned=%s, title %q, injected elements %q", what, got.Pwned, got.Title, got.Foreign)
	}
}

// TestUIHostileStrings loads, in headless Chromium, the entries of a task
// whose title, claim and call arguments an attacker wrote: nothing they
// hold runs or becomes markup, each shows as its text, invisible and
// direction-changing characters show as visible marks.
func TestUIHostileStrings(t *testing.T) {
	h := newHostileLog(t)
	// A task's history reveals its entries: without the reader token it
	// is not served (the page asks for the token).
	for tok, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, h.token: http.StatusOK} {
		req, _ := http.NewRequest("GET", h.base+"/log/task/"+h.taskID, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /log/task/ with token %q: %d, want %d", tok, resp.StatusCode, want)
		}
	}
	p, ctx := openPage(t)
	body := func() string {
		var s string
		if err := p.Eval(ctx, `document.body.innerText`, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", h.base, h.token, h.claim))
	if v != "true" {
		t.Fatalf("claim %d: data-verified=%s: %s", h.claim, v, txt)
	}
	checkNoInjection(t, ctx, p, "the claim and its timeline")
	page := body()
	for _, s := range []string{h.title, hostileTmpl} {
		if !strings.Contains(page, s) {
			t.Errorf("the claim's page does not show %q as text", s)
		}
	}
	for _, s := range []string{"report[U+202E]fdp.exe", "ad[U+200B]min"} {
		if !strings.Contains(page, s) {
			t.Errorf("the claim's page does not show %q", s)
		}
	}
	if strings.ContainsAny(page, "\u202E\u200B") {
		t.Error("the claim's page shows a bidi override or a zero-width space as is")
	}
	var marks int
	p.Eval(ctx, `document.querySelectorAll("mark.invisible").length`, &marks)
	if marks == 0 {
		t.Error("no invisible character is marked")
	}

	v, txt = verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", h.base, h.token, h.call))
	if v != "true" {
		t.Fatalf("call %d: data-verified=%s: %s", h.call, v, txt)
	}
	checkNoInjection(t, ctx, p, "the call")
	page = body()
	// The arguments show as JSON: quotes inside are escaped.
	for _, s := range []string{"<style>body{display:none}</style>", h.target, "</script><script>", "report[U+202E]fdp.exe"} {
		if !strings.Contains(page, s) {
			t.Errorf("the call's page does not show %q as text", s)
		}
	}
	if strings.ContainsAny(page, "\u202E\u200B") {
		t.Error("the call's page shows a bidi override or a zero-width space as is")
	}

}

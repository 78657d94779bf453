package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
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
	// A Cyrillic "а" (U+0430) makes "аdmin" read as "admin"; a Greek
	// omicron (U+03BF) makes "rοot" read as "root".
	hostileCyrillic = "\u0430dmin"
	hostileGreek    = "r\u03BFot"
)

// hostileLog is a sidecar whose task and calls carry hostile strings: the
// task's title and claim, a call's arguments (markup, a javascript: URL,
// bidi and zero-width characters, a long string).
type hostileLog struct {
	base, token            string
	handler                http.Handler // the sidecar's, which base serves
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

	h := &hostileLog{title: hostileImg + hostileScript, summary: hostileTmpl + " " + hostileBidi + " " + hostileZW + " " + hostileGreek, target: "javascript:window.pwned=1"}
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": h.title + " for " + hostileCyrillic, "description": hostileStyle})
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
		"template": hostileTmpl, "file": hostileBidi, "user": hostileZW, "owner": hostileCyrillic, "long": strings.Repeat("A", 8000)})
	h.call = callOf(t, ctx, sc, h.call)
	h.claim = index("report_completion", map[string]any{"task_id": h.taskID, "provenance": "observed", "summary": h.summary, "evidence": []uint64{h.call}})

	h.handler = sc.handler()
	hs := httptest.NewServer(h.handler)
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
// direction-changing characters show as visible marks, and so does each
// letter of another script in a word ("аdmin" with a Cyrillic "а", which
// showed as "admin").
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
	for _, s := range []string{"report[U+202E]fdp.exe", "ad[U+200B]min", "\u0430[Cyrillic U+0430]dmin", "r\u03BF[Greek U+03BF]ot"} {
		if !strings.Contains(page, s) {
			t.Errorf("the claim's page does not show %q", s)
		}
	}
	if strings.ContainsAny(page, "\u202E\u200B") {
		t.Error("the claim's page shows a bidi override or a zero-width space as is")
	}
	checkNoHomoglyphs(t, page, "the claim's page")
	var marks, mixed int
	p.Eval(ctx, `document.querySelectorAll("mark.invisible").length`, &marks)
	p.Eval(ctx, `document.querySelectorAll("mark.mixed").length`, &mixed)
	if marks == 0 || mixed == 0 {
		t.Errorf("%d invisible characters and %d letters of another script marked; want some of each", marks, mixed)
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
	if !strings.Contains(page, "\u0430[Cyrillic U+0430]dmin") {
		t.Errorf("the call's page does not mark the Cyrillic letter of %q", hostileCyrillic)
	}
	checkNoHomoglyphs(t, page, "the call's page")
}

// checkNoHomoglyphs fails t if page shows a word of the hostile log that
// mixes scripts without marking the letter of the other script.
func checkNoHomoglyphs(t *testing.T, page, what string) {
	t.Helper()
	for _, s := range []string{hostileCyrillic, hostileGreek} {
		if strings.Contains(page, s) {
			t.Errorf("%s shows %q (%+q) with no mark on its letter of another script", what, s, s)
		}
	}
}

// TestUIShownMarks runs the page's shown.js in Chromium: a word mixing
// scripts whose letters look alike shows each letter not of its main
// script with a mark naming the script and code point; a word wholly of
// another script's letters that each look Latin ("раура" in Cyrillic,
// full-width "ａｄｍｉｎ") shows with a mark naming the script and the word
// it passes for; words of one script with letters that look like none
// ("привет"), words apart, letters of no confusable script and digits
// show as they are. A megabyte and a half of such words is marked in one
// pass (the count is checked, not the time).
func TestUIShownMarks(t *testing.T) {
	p, ctx := openBarePage(t)
	cases := []struct{ In, Want string }{
		{"admin", "admin"},
		{"\u0430dmin", "\u0430[Cyrillic U+0430]dmin"},
		{"r\u03BFot", "r\u03BF[Greek U+03BF]ot"},
		{"\u0440\u0430\u0443\u0440\u0430l", "\u0440\u0430\u0443\u0440\u0430l[Latin U+006C]"}, // Cyrillic with a Latin "l"
		{"\U0001D41Admin", "\U0001D41A[symbol U+1D41A]dmin"},                                 // a mathematical bold "a"
		{"fs__st\u043Ere", "fs__st\u043E[Cyrillic U+043E]re"},
		{"\u0430\u200Bdmin", "\u0430[Cyrillic, not \u201Ca\u201D][U+200B]dmin"},
		{"hello \u043C\u0438\u0440", "hello \u043C\u0438\u0440"},
		// A word wholly of letters of another script that look Latin, and
		// full-width Latin.
		{"\u0440\u0430\u0443\u0440\u0430\u04CF", "\u0440\u0430\u0443\u0440\u0430\u04CF[Cyrillic, not \u201Cpaypal\u201D]"},
		{"log in to \u0455\u0441\u043E\u0440\u0435 2", "log in to \u0455\u0441\u043E\u0440\u0435[Cyrillic, not \u201Cscope\u201D] 2"},
		{"\u0391\u03A1\u0399_2", "\u0391\u03A1\u0399_2[Greek, not \u201CAPI_2\u201D]"},
		{"\uFF41dmin", "\uFF41[full-width U+FF41]dmin"},
		{"\uFF41\uFF44\uFF4D\uFF49\uFF4E", "\uFF41\uFF44\uFF4D\uFF49\uFF4E[full-width, not \u201Cadmin\u201D]"},
		{"\U0001D41A\U0001D41D\U0001D426\U0001D422\U0001D427", "\U0001D41A\U0001D41D\U0001D426\U0001D422\U0001D427[symbol, not \u201Cadmin\u201D]"},
		{"\u13DA\uAB7C\u13A2", "\u13DA\uAB7C\u13A2[Cherokee, not \u201CSET\u201D]"},
		// Cyrillic and Greek words with letters that look like no Latin one.
		{"\u043F\u0440\u0438\u0432\u0435\u0442, \u041C\u0418\u0420", "\u043F\u0440\u0438\u0432\u0435\u0442, \u041C\u0418\u0420"},
		{"\u03BA\u03B1\u03BB\u03B7\u03BC\u03AD\u03C1\u03B1", "\u03BA\u03B1\u03BB\u03B7\u03BC\u03AD\u03C1\u03B1"},
		{"API\u547C\u3073\u51FA\u3057 5\u00B5s", "API\u547C\u3073\u51FA\u3057 5\u00B5s"},
	}
	cj, _ := json.Marshal(cases)
	var out struct {
		Bad   []string
		Marks int
	}
	script := `(async () => {
		const m = await import("/ui/shown.js");
		const text = (s) => m.shown(s).map((n) => typeof n === "string" ? n : n.textContent).join("");
		const out = {Bad: [], Marks: 0};
		for (const c of ` + string(cj) + `) {
			const got = text(c.In);
			if (got !== c.Want) out.Bad.push(JSON.stringify(c.In) + " shows as " + JSON.stringify(got));
		}
		out.Marks = m.shown("ab\u0430 \u0440\u0430\u0443\u0440\u0430 ".repeat(1 << 17)).filter((n) => typeof n !== "string" && n.className === "mixed").length;
		return out;
	})()`
	if err := p.Eval(ctx, script, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Bad) > 0 || out.Marks != 1<<18 {
		t.Errorf("shown.js: %q; %d marks in the long text, want %d", out.Bad, out.Marks, 1<<18)
	}
}

// TestUIDeepNesting: an entry whose arguments and summary nest 100,000
// arrays deep (no log holds one: it refuses entries nested deeper than
// 100; a hostile server or bundle can serve one) shows, cut at the page's
// depth cap with a marked summary of what was cut. The page showed no
// entry: rendering it exhausted the call stack.
func TestUIDeepNesting(t *testing.T) {
	const n = 100_000
	h := newHostileLog(t)
	deep := strings.Repeat("[", n) + `"x"` + strings.Repeat("]", n)
	entry := fmt.Sprintf(`{"actor":"alice","args":{"deep":%s},"kind":"call","server":"fs","summary":%s,"time":"2026-01-02T03:04:05Z","tool":"store"}`, deep, deep)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == fmt.Sprintf("/log/entry/%d", h.call) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, entry)
			return
		}
		h.handler.ServeHTTP(w, r)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, h.token, h.call))
	if v != "false" || strings.Contains(txt, "the page failed") {
		t.Errorf("a substituted entry nested %d deep: data-verified=%s: %s", n, v, txt)
	}
	var cuts []string
	if err := p.Eval(ctx, `[...document.querySelectorAll("#entry mark.cut")].map(e => e.innerText)`, &cuts); err != nil {
		t.Fatal(err)
	}
	// The cap is 100 levels of the entry, its own object included, as the
	// log's: the summary's row and the entry's fields show the outer 99
	// arrays of the summary, and the outer 98 of the arguments (inside
	// args).
	var want []string
	for _, shown := range []int{99, 98, 99} {
		want = append(want, fmt.Sprintf("[cut: an array %d levels deep, holding %d values; shown only in the exact bytes below]", n-shown, n-shown))
	}
	if fmt.Sprint(cuts) != fmt.Sprint(want) {
		t.Errorf("the cut values show as %q, want %q", cuts, want)
	}
	var depth int
	if err := p.Eval(ctx, `(() => { let d = 0; for (let e = document.querySelector("#entry mark.cut"); e; e = e.parentElement) d++; return d; })()`, &depth); err != nil {
		t.Fatal(err)
	}
	if depth == 0 || depth > 20 {
		t.Errorf("the cut mark is %d elements deep in the page", depth)
	}
}

// TestUIDeepParts feeds a value nested 100,000 arrays deep to every other
// part of the page that shows what a server or bundle sent: an entry's
// auth block (issuer, subject, the act chain), the task's timeline (its
// title, each step's actor, time, words, auth and indices) and the
// anchors. Each shows, cut with a marked summary, and the task's latest
// step, whose index is such a value, is reported as no entry index. Each
// part exhausted the call stack, and the page showed "the page failed"
// instead of the entry.
func TestUIDeepParts(t *testing.T) {
	const n = 100_000
	h := newHostileLog(t)
	d := strings.Repeat("[", n) + `"x"` + strings.Repeat("]", n)
	auth := fmt.Sprintf(`{"act":{"act":{"act":%[1]s,"sub":%[1]s},"client_id":%[1]s,"iss":%[1]s,"sub":%[1]s},"client_id":%[1]s,"iss":%[1]s,"jti":%[1]s,"scope":%[1]s,"sub":%[1]s,"token_sha256":%[1]s,"via":%[1]s}`, d)
	entry := fmt.Sprintf(`{"actor":"alice","auth":%s,"kind":"task.claim","provenance":"observed","summary":"done","task_id":%q,"time":"2026-01-02T03:04:05Z"}`, auth, h.taskID)
	var steps []string
	for _, kind := range []string{`"task.create"`, `"task.claim"`, `"task.handoff"`, `"task.release"`, `"task.cancel"`, d} {
		steps = append(steps, fmt.Sprintf(`{"actor":%[1]s,"auth":%[2]s,"evidence":[%[1]s,%[1]s],"index":%[1]s,"kind":%[3]s,"leaf_hash":%[1]s,"note":%[1]s,"offer_to":%[1]s,"provenance":%[1]s,"summary":%[1]s,"time":%[1]s,"title":%[1]s,"to":%[1]s}`, d, auth, kind))
	}
	task := fmt.Sprintf(`{"history":[%s],"owner":%s,"state":%s,"task_id":%q,"title":%s}`, strings.Join(steps, ","), d, d, h.taskID, d)
	anchors := fmt.Sprintf(`[{"name":%[1]s,"root":%[1]s,"size":1000000,"timestamps":[{"time":%[1]s,"url":%[1]s}],"tlogs":[{"integrated_time":%[1]s,"kind":%[1]s,"log_index":%[1]s,"url":%[1]s}],"url":%[1]s},{"name":"b","size":%[1]s}]`, d)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := map[string]string{
			fmt.Sprintf("/log/entry/%d", h.claim): entry,
			"/log/task/" + h.taskID:               task,
			"/log/anchors":                        anchors,
		}[r.URL.Path]
		if !ok {
			h.handler.ServeHTTP(w, r)
			return
		}
		if r.URL.Query().Has("after") {
			body = "[]"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	// Each part of the page, by name: its text and its cut values' marks.
	var parts []struct {
		Name, Text string
		Cuts       []string
	}
	look := func(what string) {
		t.Helper()
		if err := p.Eval(ctx, `[["verdict", document.getElementById("verdict")], ["auth", document.querySelector("#entry dl.auth")],
			["task title", document.querySelector("#timeline h2")], ["task", document.querySelector("#timeline p")],
			...[...document.querySelectorAll("#timeline li")].map((e) => ["step", e]),
			...[...document.querySelectorAll("#anchors tbody tr")].map((e) => ["anchor", e])].map(([name, e]) =>
			({Name: name, Text: e?.innerText ?? "", Cuts: [...(e?.querySelectorAll("mark.cut") ?? [])].map((m) => m.innerText)}))`, &parts); err != nil {
			t.Fatal(err)
		}
		for _, pt := range parts {
			if strings.Contains(pt.Text, "page failed") || strings.Contains(pt.Text, "call stack") {
				t.Errorf("%s: the %s shows a failure: %.300s", what, pt.Name, pt.Text)
			}
		}
	}

	v, _ := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, h.token, h.claim))
	look("the substituted claim")
	if v != "false" {
		t.Errorf("the substituted claim: data-verified=%s", v)
	}
	cut := regexp.MustCompile(`^\[cut: an array [0-9]+ levels deep, holding [0-9]+ values; [^\]]+\]$`)
	count := map[string]int{}
	for _, pt := range parts[1:] {
		count[pt.Name]++
		if len(pt.Cuts) == 0 {
			t.Errorf("the %s shows no cut value: %.300s", pt.Name, pt.Text)
		}
		for _, c := range pt.Cuts {
			if !cut.MatchString(c) {
				t.Errorf("the %s shows a cut value as %q", pt.Name, c)
			}
		}
	}
	// The anchor whose size is no number is left out.
	if count["step"] != 6 || count["anchor"] != 1 {
		t.Errorf("the page shows %d steps and %d anchors, want 6 and 1", count["step"], count["anchor"])
	}

	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", swap.URL, h.token, h.taskID))
	look("the substituted task")
	if v != "false" || !strings.Contains(txt, "no entry index") {
		t.Errorf("a task whose latest step's index is nested %d deep: data-verified=%s: %s", n, v, txt)
	}
}

// TestUIInheritedKind: a substituted entry whose kind names a member
// every JavaScript object inherits ("constructor", "__proto__",
// "toString") is shown as another kind. The page looked its words up in a
// plain object and showed the source of JavaScript's Object function as
// what the kind means.
func TestUIInheritedKind(t *testing.T) {
	h := newHostileLog(t)
	var kind atomic.Pointer[string]
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == fmt.Sprintf("/log/entry/%d", h.call) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"actor":"alice","kind":%q,"time":"2026-01-02T03:04:05Z"}`, *kind.Load())
			return
		}
		h.handler.ServeHTTP(w, r)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	for _, k := range []string{"constructor", "__proto__", "toString", "hasOwnProperty"} {
		kind.Store(&k)
		verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, h.token, h.call))
		var txt string
		if err := p.Eval(ctx, `document.getElementById("entry").innerText`, &txt); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(txt, k+" (another kind)") || strings.Contains(txt, "native code") {
			t.Errorf("an entry of kind %q shows as: %s", k, txt)
		}
	}
}

// TestUIFailureShown: a page that throws after its verdict says so,
// whatever the verdict: a fault injected into the browser (TextDecoder's
// decode throws, so showing the entry fails) shows as "the page failed",
// beside the reason a substituted entry is not verified. After a false
// verdict the page showed nothing of the failure.
func TestUIFailureShown(t *testing.T) {
	h := newHostileLog(t)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == fmt.Sprintf("/log/entry/%d", h.claim) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"actor":"mallory","kind":"task.claim","time":"2026-01-02T03:04:05Z"}`)
			return
		}
		h.handler.ServeHTTP(w, r)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	if err := p.BeforeScripts(ctx, `TextDecoder.prototype.decode = () => { throw new Error("injected decode fault"); };`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, base, reason string }{
		{"the log's own entry", h.base, ""},
		{"a substituted entry", swap.URL, "the receipt names another leaf hash"},
	} {
		v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", tc.base, h.token, h.claim))
		if v != "false" || !strings.Contains(txt, "the page failed: injected decode fault") || !strings.Contains(txt, tc.reason) {
			t.Errorf("%s, with a fault while it shows: data-verified=%s: %s", tc.what, v, txt)
		}
	}
}

// TestUIWrongShapes substitutes, one at a time, answers of a shape the
// page does not read: a log.json whose witnesses are null or not text,
// whose vkey, source or missing are of the wrong kind, or that is null; a
// /log/anchors answer that is no array, no JSON, or whose last anchor
// has no name; a task answer that is null, whose history is no array, or
// whose steps are not objects; an entry that is null or whose auth is no
// object. Each shows, in its part of the page, as what was wrong (which
// answer, what it should be), and the rest of the page is still shown.
// The page threw on a null witnesses and a null entry, and showed a
// JavaScript message ("list is not iterable") for anchors of no array.
func TestUIWrongShapes(t *testing.T) {
	h := newHostileLog(t)
	var info struct {
		VKey string `json:"vkey"`
	}
	resp, err := http.Get(h.base + "/ui/log.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var answers atomic.Pointer[map[string]string]
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, ok := (*answers.Load())[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, body)
			return
		}
		h.handler.ServeHTTP(w, r)
	}))
	defer swap.Close()
	vkey, _ := json.Marshal(info.VKey)
	entry, task := fmt.Sprintf("/log/entry/%d", h.claim), "/log/task/"+h.taskID
	cases := []struct {
		name     string
		answers  map[string]string
		fragment string
		verified string
		want     []string // "section id: text it shows"
	}{
		{"null witnesses", map[string]string{"/ui/log.json": `{"source":"sidecar","vkey":` + string(vkey) + `,"witnesses":null}`}, "", "true",
			[]string{"checkpoint: the witnesses in /ui/log.json is null, not an array of witness verifier keys"}},
		{"witnesses, source and missing of the wrong kind", map[string]string{"/ui/log.json": `{"missing":{"a":1},"source":5,"vkey":` + string(vkey) + `,"witnesses":["x",5]}`}, "", "true",
			[]string{"checkpoint: member 1 of the witnesses in /ui/log.json is a number, not text", "source: the source in /ui/log.json is a number, not text",
				"missing: the missing in /ui/log.json is an object, not an array of what the directory lacks"}},
		{"a vkey of no text", map[string]string{"/ui/log.json": `{"source":"sidecar","vkey":7,"witnesses":[]}`}, "", "false",
			[]string{"verdict: the vkey in /ui/log.json is a number, not a verifier key (text): enter the verifier key", "logkey: the vkey in /ui/log.json is a number"}},
		{"a null log.json, the reader's own key", map[string]string{"/ui/log.json": `null`}, "&vkey=" + url.QueryEscape(info.VKey), "true",
			[]string{"logkey: /ui/log.json is null, not an object", "source: /ui/log.json is null, not an object"}},
		{"anchors of no array", map[string]string{"/log/anchors": `{"anchors":[]}`}, "", "true",
			[]string{"anchors: the answer to /log/anchors is an object, not an array of anchors"}},
		{"anchors of no JSON", map[string]string{"/log/anchors": `<html>`}, "", "true", []string{"anchors: the answer to /log/anchors is not JSON"}},
		{"an anchor with no name, no size, timestamps of no array", map[string]string{"/log/anchors": `[{"size":1000000,"timestamps":"x","tlogs":{}},{"size":"x"}]`}, "", "true",
			[]string{"anchors: the timestamps of the anchor of size 1000000 is text, not an array", "anchors: the transparency log entries of the anchor of size 1000000 is an object, not an array",
				"anchors: the name of the last anchor in the answer to /log/anchors is missing, not text", "anchors: 1 of the anchors listed name no tree size"}},
		{"a null task", map[string]string{task: `null`}, "", "true", []string{"timeline: the answer to " + task + " is null, not an object (a task)"}},
		{"a history of no array", map[string]string{task: `{"history":{},"task_id":"` + h.taskID + `"}`}, "", "true",
			[]string{"timeline: the history in the answer to " + task + " is an object, not an array of steps"}},
		{"steps of the wrong kind", map[string]string{task: `{"history":[5,{"auth":"x","evidence":"y","index":0,"kind":"task.create"}],"task_id":"` + h.taskID + `","title":"t"}`}, "", "true",
			[]string{"timeline: step 1 of the history of task " + h.taskID + " is a number, not an object", "timeline: the auth of step 2 is text, not an object",
				"timeline: the evidence of step 2 is text, not an array of entry indices"}},
		{"a null entry", map[string]string{entry: `null`}, "", "false", []string{fmt.Sprintf("entry: entry %d is null, not an object", h.claim)}},
		{"an entry's auth of no object", map[string]string{entry: `{"actor":"alice","auth":5,"kind":"task.claim","time":"2026-01-02T03:04:05Z"}`}, "", "false",
			[]string{fmt.Sprintf("entry: the auth of entry %d is a number, not an object", h.claim)}},
	}
	p, ctx := openPage(t)
	for _, tc := range cases {
		answers.Store(&tc.answers)
		v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d%s", swap.URL, h.token, h.claim, tc.fragment))
		if v != tc.verified {
			t.Errorf("%s: data-verified=%s, want %s: %s", tc.name, v, tc.verified, txt)
		}
		var shown map[string]string
		if err := p.Eval(ctx, `Object.fromEntries(["verdict", "logkey", "source", "missing", "entry", "checkpoint", "anchors", "timeline"].map((id) => [id, document.getElementById(id).innerText]))`, &shown); err != nil {
			t.Fatal(err)
		}
		for id, s := range shown {
			if strings.Contains(s, "page failed") {
				t.Errorf("%s: the %s shows a failure: %.300s", tc.name, id, s)
			}
		}
		// The rest of the page is shown: the entry, and its anchors.
		if !strings.Contains(shown["entry"], fmt.Sprintf("Entry %d", h.claim)) || !strings.Contains(shown["anchors"], "Anchors") {
			t.Errorf("%s: the entry or its anchors are not shown: %.300s / %.300s", tc.name, shown["entry"], shown["anchors"])
		}
		for _, w := range tc.want {
			id, s, _ := strings.Cut(w, ": ")
			if !strings.Contains(shown[id], s) {
				t.Errorf("%s: the %s does not show %q: %.500s", tc.name, id, s, shown[id])
			}
		}
	}
}

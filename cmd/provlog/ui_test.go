package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/cmd/internal/browser"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness/witnesstest"
)

// chromium finds Debian's Chromium (tools/test.sh installs it); without
// it the browser tests skip, and fail under CI=true.
func chromium(t testing.TB) string {
	t.Helper()
	p := os.Getenv("PROVLOG_CHROMIUM")
	if p == "" {
		p, _ = exec.LookPath("chromium")
	}
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (tools/test.sh installs Debian's chromium); the browser tests cannot run")
		}
		t.Skip("chromium is not installed: apt-get install chromium")
	}
	return p
}

// uiLog is a sidecar with a recorded task: created, accepted, one call of
// a downstream tool with a redacted argument, and an observed claim citing
// that call; its HTTP handler is served on loopback.
type uiLog struct {
	sc             *sidecar
	base, token    string
	taskID         string
	call, claim    uint64
	vkey, otherKey string
	data, cfgPath  string
	close          func() // stops the sidecar (once)
}

type writeIn struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	APIKey  string `json:"api_key"`
}

func newUILog(t *testing.T, vouched bool) *uiLog {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file"}, func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgText := fmt.Sprintf("data: %s\norigin: provlog.example/agent-7\nactor: alice\nservers:\n  - id: fs\n    url: %s\n    redact: [api_key]\n", data, down.URL)
	if vouched {
		cfgText += vouchers(t, dir, data)
	}
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, cfgText)
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	var once sync.Once
	closeSC := func() { once.Do(sc.close) }
	t.Cleanup(closeSC)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := sc.proxy.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "auditor-test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	l := &uiLog{sc: sc, vkey: sc.keys.vkey, data: cfg.Data, cfgPath: cfgPath, close: closeSC}
	l.record(t, ctx, cs)
	if vouched {
		// Wait for the witness to cosign the tree holding the claim, anchor
		// it, and wait for a cosigned checkpoint holding the anchor entry.
		waitCosigned := func() {
			size, _ := sc.seq.Checkpoint()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if c, err := log.ParseCheckpointNote(sc.witness.cos.Latest()); err == nil && c.Size >= size {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the witness did not cosign size %d: %v", size, sc.witness.status())
				}
			}
		}
		waitCosigned()
		if _, err := sc.anchors.runner.AnchorNow(ctx); err != nil {
			t.Fatal(err)
		}
		waitCosigned()
	}
	// An Ed25519 note key of the same name that did not sign the log.
	_, other, err := note.GenerateKey(rand.Reader, "provlog.example/agent-7")
	if err != nil {
		t.Fatal(err)
	}
	l.otherKey = other
	hs := httptest.NewServer(sc.handler())
	t.Cleanup(hs.Close)
	l.base = hs.URL
	tok, err := os.ReadFile(filepath.Join(cfg.Data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	l.token = strings.TrimSpace(string(tok))
	return l
}

// record writes the task's history through the proxy: created, accepted,
// one call of fs__write_file with a redacted api_key, and an observed
// claim citing that call.
func (l *uiLog) record(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "write the quarterly report", "description": "to reports/q3.md"})
	l.taskID = created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": l.taskID})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: map[string]any{
		"path": "reports/q3.md", "content": "# Q3\nrevenue up", "api_key": "sk-very-secret"}})
	if err != nil || res.IsError {
		t.Fatalf("fs__write_file: %v %v", err, res)
	}
	rc, err := log.ParseReceipt([]byte(res.Meta["dev.provlog/receipt"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	l.call = callOf(t, ctx, l.sc, rc.Index)
	_, claimRC := callTool(t, cs, "report_completion", map[string]any{"task_id": l.taskID, "provenance": "observed",
		"summary": "wrote reports/q3.md", "evidence": []uint64{l.call}})
	crc, err := log.ParseReceipt([]byte(claimRC))
	if err != nil {
		t.Fatal(err)
	}
	l.claim = crc.Index
}

// callOf returns the index of the call entry a tool call's receipt, for
// entry i, stands for: the call entry's, or its call.result's, which names
// it.
func callOf(t *testing.T, ctx context.Context, sc *sidecar, i uint64) uint64 {
	t.Helper()
	es, err := sc.store.Entries(ctx, i, i+1)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Kind string `json:"kind"`
		Call uint64 `json:"call"`
	}
	if err := json.Unmarshal(es[0], &e); err != nil {
		t.Fatal(err)
	}
	if e.Kind == "call.result" {
		return e.Call
	}
	return i
}

// vouchers starts a provlog witness, an RFC 3161 TSA and a Rekor for the
// log of data dir (making its keys), and returns their config lines.
func vouchers(t *testing.T, dir, data string) string {
	t.Helper()
	k := mustKeygen(t, data, "provlog.example/agent-7")
	cos := witnesstest.NewCosigner(t, "witness.example/w1")
	w := logWitness(t, cos, k.verifier)
	ws := httptest.NewServer(w)
	t.Cleanup(ws.Close)
	tsa, rk := testtsa.New(t, "Example TSA"), fakerekor.New(t)
	os.WriteFile(filepath.Join(dir, "tsa.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}), 0o600)
	os.WriteFile(filepath.Join(dir, "rekor.pub"), rk.PublicKeyPEM(), 0o600)
	return fmt.Sprintf(`witnesses:
  - {url: %s, vkey: "%s"}
witness_policy: {threshold: 1, interval: 50ms}
anchors:
  interval: 1h
  timeout: 5s
  tsa: [{url: %s, roots: [tsa.pem]}]
  rekor: {url: %s, public_key: rekor.pub}
`, ws.URL, cos.Verifier().String(), tsa.URL, rk.URL)
}

// openPage starts Chromium and returns a page in it.
func openPage(t testing.TB) (*browser.Page, context.Context) {
	t.Helper()
	b, err := browser.Start(chromium(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return p, ctx
}

// verdict loads url and waits for the page's verdict.
func verdict(t *testing.T, ctx context.Context, p *browser.Page, url string) (verified, text string) {
	t.Helper()
	if err := p.Navigate(ctx, "about:blank"); err != nil {
		t.Fatal(err)
	}
	// Only once the last page is gone can a verdict be the new page's.
	if _, err := p.WaitString(ctx, `location.href === "about:blank" ? "gone" : ""`); err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	v, err := p.WaitString(ctx, `document.getElementById("verdict")?.dataset.verified`)
	if err != nil {
		t.Fatalf("no verdict on %s: %v", url, err)
	}
	if _, err := p.WaitString(ctx, `document.body?.dataset.done`); err != nil {
		t.Fatalf("the page did not finish %s: %v", url, err)
	}
	if err := p.Eval(ctx, `document.getElementById("verdict").innerText`, &text); err != nil {
		t.Fatal(err)
	}
	return v, text
}

// screenshot saves the page as name in $PROVLOG_UI_SCREENSHOTS, if set
// (tools/test.sh leaves it unset; `PROVLOG_UI_SCREENSHOTS=$PWD/docs` makes
// the README's pictures).
func screenshot(t *testing.T, ctx context.Context, p *browser.Page, name string) {
	t.Helper()
	png, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("PROVLOG_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUIVerifiesInBrowser loads the auditor's view of a real sidecar in
// headless Chromium: a call entry and a claim verify (and show the
// redacted argument and the task's timeline), a key that did not sign and a
// proof changed on the way do not, and neither does a page without a token.
func TestUIVerifiesInBrowser(t *testing.T) {
	l := newUILog(t, true)
	p, ctx := openPage(t)
	open := func(frag string) (string, string) { return verdict(t, ctx, p, l.base+"/ui/#"+frag) }

	v, txt := open(fmt.Sprintf("token=%s&entry=%d", l.token, l.call))
	if v != "true" {
		t.Fatalf("call entry %d: data-verified=%s: %s", l.call, v, txt)
	}
	var marks int
	if err := p.Eval(ctx, `document.querySelectorAll("#entry mark.redacted").length`, &marks); err != nil || marks != 1 {
		t.Errorf("redacted marks on the call entry: %d, %v; want 1", marks, err)
	}
	var body string
	p.Eval(ctx, `document.body.innerText`, &body)
	if strings.Contains(body, "sk-very-secret") {
		t.Fatal("the redacted value is on the page")
	}
	if strings.Contains(body, l.token) {
		t.Error("the token is shown on the page")
	}
	var hash string
	p.Eval(ctx, `location.hash`, &hash)
	if strings.Contains(hash, "token") {
		t.Errorf("the token stayed in the address bar: %s", hash)
	}
	screenshot(t, ctx, p, "ui-entry.png")

	// The same page, a new load: the token came from the fragment only once.
	v, txt = open(fmt.Sprintf("token=%s&entry=%d", l.token, l.claim))
	if v != "true" {
		t.Fatalf("claim entry %d: data-verified=%s: %s", l.claim, v, txt)
	}
	var steps []string
	if err := p.Eval(ctx, `[...document.querySelectorAll("#timeline li")].map(li => li.innerText)`, &steps); err != nil || len(steps) != 3 {
		t.Fatalf("timeline: %q, %v; want create, accept, claim", steps, err)
	}
	if !strings.Contains(steps[2], "observed") || !strings.Contains(steps[2], fmt.Sprintf("entry %d", l.call)) {
		t.Errorf("claim step %q does not show its provenance and evidence", steps[2])
	}
	var checked int
	if err := p.Eval(ctx, `document.querySelectorAll('#timeline li .check[data-verified="true"]').length`, &checked); err != nil || checked != 3 {
		t.Errorf("timeline steps verified in the page: %d, %v; want 3", checked, err)
	}
	var witnessRows, anchorRows []string
	p.Eval(ctx, `[...document.querySelectorAll("#checkpoint tbody tr")].map(r => r.innerText)`, &witnessRows)
	if len(witnessRows) != 2 || !strings.Contains(witnessRows[0], "✓ verified with the log's key") || !strings.Contains(witnessRows[1], "witness.example/w1") || !strings.Contains(witnessRows[1], "✓ cosignature verifies") {
		t.Errorf("signature rows: %q; want the log's signature and w1's cosignature verified", witnessRows)
	}
	p.Eval(ctx, `[...document.querySelectorAll("#anchors tbody tr")].map(r => r.innerText)`, &anchorRows)
	if len(anchorRows) != 1 || !strings.Contains(anchorRows[0], "earliest anchor") || !strings.Contains(anchorRows[0], "Rekor log index") || !strings.Contains(anchorRows[0], "✓ a prefix of the verified checkpoint (consistency proof") {
		t.Errorf("anchor rows: %q; want one anchor with a TSA time and a Rekor index", anchorRows)
	}
	screenshot(t, ctx, p, "ui-timeline.png")

	// The form: a task id typed in opens the task's latest entry, and the
	// token typed before stays out of the address bar.
	if err := p.Eval(ctx, fmt.Sprintf(`document.getElementById("q").value = %q; document.querySelector("#lookup button").click()`, l.taskID), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitString(ctx, `document.body?.dataset.done`); err != nil {
		t.Fatal(err)
	}
	var form struct{ Verified, Text, Hash string }
	p.Eval(ctx, `({Verified: document.getElementById("verdict").dataset.verified, Text: document.getElementById("verdict").innerText, Hash: location.hash})`, &form)
	if form.Verified != "true" || !strings.Contains(form.Text, fmt.Sprintf("Entry %d ", l.claim)) || form.Hash != "#task="+l.taskID {
		t.Errorf("looking up the task id with the form: %+v", form)
	}

	// By task id and by leaf hash.
	if v, txt := open(fmt.Sprintf("token=%s&task=%s", l.token, l.taskID)); v != "true" || !strings.Contains(txt, fmt.Sprintf("Entry %d ", l.claim)) {
		t.Errorf("by task id: data-verified=%s: %s", v, txt)
	}
	es, _ := l.sc.store.Entries(ctx, l.call, l.call+1)
	leaf := log.LeafHash(es[0])
	if v, txt := open(fmt.Sprintf("token=%s&hash=%x", l.token, leaf)); v != "true" || !strings.Contains(txt, fmt.Sprintf("Entry %d ", l.call)) {
		t.Errorf("by leaf hash: data-verified=%s: %s", v, txt)
	}

	// The log's own key given in the fragment verifies; another does not.
	if v, txt := open(fmt.Sprintf("token=%s&entry=%d&vkey=%s", l.token, l.call, l.vkey)); v != "true" {
		t.Errorf("with the log's vkey in the fragment: %s: %s", v, txt)
	}
	for name, key := range map[string]string{"a key of the same name": l.otherKey, "garbage": "not-a-key"} {
		if v, txt := open(fmt.Sprintf("token=%s&entry=%d&vkey=%s", l.token, l.call, key)); v != "false" {
			t.Errorf("with %s as vkey: data-verified=%s: %s", name, v, txt)
		}
	}
	if v, txt := open(fmt.Sprintf("entry=%d", l.call)); v != "false" || !strings.Contains(txt, "token") {
		t.Errorf("without a token: data-verified=%s: %s", v, txt)
	}
}

// TestUITamperedProof serves the sidecar's API with one byte of each
// inclusion proof, or of the entry, changed: the page must not verify.
func TestUITamperedProof(t *testing.T) {
	l := newUILog(t, true)
	p, ctx := openPage(t)
	for _, part := range []string{"proof", "entry", "checkpoint"} {
		t.Run(part, func(t *testing.T) {
			hs := httptest.NewServer(tamper(l.sc.handler(), part))
			defer hs.Close()
			v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", hs.URL, l.token, l.claim))
			if v != "false" {
				t.Fatalf("tampered %s: data-verified=%s: %s", part, v, txt)
			}
		})
	}
	// A consistency proof changed on the way: the entry still verifies,
	// but its anchor is shown as not consistent with the checkpoint.
	hs := httptest.NewServer(tamper(l.sc.handler(), "consistency"))
	defer hs.Close()
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", hs.URL, l.token, l.claim)); v != "true" {
		t.Fatalf("tampered consistency proof: data-verified=%s: %s", v, txt)
	}
	var row string
	p.Eval(ctx, `document.querySelector("#anchors tbody tr")?.innerText`, &row)
	if !strings.Contains(row, "✗ NOT consistent") {
		t.Errorf("anchor row with a tampered consistency proof: %q", row)
	}
	// A task history naming another leaf hash for its first step: that
	// step is marked as not verified.
	hs2 := httptest.NewServer(tamper(l.sc.handler(), "task"))
	defer hs2.Close()
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", hs2.URL, l.token, l.claim)); v != "true" {
		t.Fatalf("tampered task history: data-verified=%s: %s", v, txt)
	}
	var marks []string
	p.Eval(ctx, `[...document.querySelectorAll("#timeline .check")].map(e => e.dataset.verified + " " + e.innerText)`, &marks)
	if len(marks) != 3 || !strings.HasPrefix(marks[0], "false (✗ not verified: the history names another leaf hash") || !strings.HasPrefix(marks[1], "true") {
		t.Errorf("timeline marks with a tampered history: %q", marks)
	}
}

// TestUISubstitutedAnswers: a server (or a proxy) that answers a question
// with the truthful answer to another one is not believed. Asked for a
// leaf hash the log does not hold, it gave a real entry's receipt, and
// asked for a task that does not exist, another task's history: the page
// said "✓ Verified" to both.
func TestUISubstitutedAnswers(t *testing.T) {
	l := newUILog(t, true)
	p, ctx := openPage(t)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/log/proof/inclusion" && r.URL.Query().Has("hash"):
			r.URL.RawQuery = fmt.Sprintf("index=%d", l.claim)
		case strings.HasPrefix(r.URL.Path, "/log/task/"):
			r.URL.Path = "/log/task/" + l.taskID
		}
		l.sc.handler().ServeHTTP(w, r)
	}))
	defer swap.Close()
	absent := strings.Repeat("ab", 32)
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&hash=%s", swap.URL, l.token, absent)); v != "false" || !strings.Contains(txt, "not "+absent) {
		t.Errorf("another entry for an absent leaf hash: data-verified=%s: %s", v, txt)
	}
	other := "t_" + strings.Repeat("0", 32)
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", swap.URL, l.token, other)); v != "false" || !strings.Contains(txt, "not "+other) {
		t.Errorf("another task's history: data-verified=%s: %s", v, txt)
	}
	// The same questions, answered truthfully, still verify.
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", swap.URL, l.token, l.taskID)); v != "true" {
		t.Errorf("the task's own history: data-verified=%s: %s", v, txt)
	}
}

// tamper changes one byte of what h answers: the first proof hash of an
// inclusion proof, a byte of an entry, the root of a receipt's checkpoint,
// the first hash of a consistency proof, or the leaf hash of a task
// history's first step.
func tamper(h http.Handler, part string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		lines := strings.Split(string(body), "\n")
		switch {
		case part == "proof" && r.URL.Path == "/log/proof/inclusion":
			lines[3] = flipBase64(lines[3]) // extra, index, then the first proof hash
			body = []byte(strings.Join(lines, "\n"))
		case part == "entry" && strings.HasPrefix(r.URL.Path, "/log/entry/"):
			body = bytes.Replace(body, []byte("q3"), []byte("q4"), 1)
		case part == "task" && strings.HasPrefix(r.URL.Path, "/log/task/"):
			i := bytes.Index(body, []byte(`"leaf_hash":"`)) + len(`"leaf_hash":"`)
			body[i] ^= 1 // the first step's leaf hash no longer names its entry
		case part == "consistency" && r.URL.Path == "/log/proof/consistency":
			lines[0] = flipBase64(lines[0])
			body = []byte(strings.Join(lines, "\n"))
		case part == "checkpoint" && r.URL.Path == "/log/proof/inclusion":
			for i := range lines {
				if lines[i] == "" {
					lines[i+3] = flipBase64(lines[i+3]) // the checkpoint's root
					break
				}
			}
			body = []byte(strings.Join(lines, "\n"))
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// flipBase64 flips one bit of the bytes a base64 line holds.
func flipBase64(s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		panic("not a base64 line: " + s)
	}
	b[len(b)/2] ^= 1
	return base64.StdEncoding.EncodeToString(b)
}

// TestUIViewBundle exports the log to a bundle and opens it with provlog
// view's server: the claim verifies with its timeline, offline; a bundle
// with one entry byte changed does not verify. The evidence of a call in
// a log without witnesses or anchors verifies and shows what it lacks.
func TestUIViewBundle(t *testing.T) {
	l := newUILog(t, false)
	l.close()
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", l.data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	p, ctx := openPage(t)
	serve := func() string { return serveView(t, ctx, out) }
	base := serve()
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=%d", base, l.claim))
	if v != "true" {
		t.Fatalf("claim from the bundle: data-verified=%s: %s", v, txt)
	}
	var steps int
	if err := p.Eval(ctx, `document.querySelectorAll("#timeline li").length`, &steps); err != nil || steps != 3 {
		t.Errorf("timeline from the bundle: %d steps, %v; want 3", steps, err)
	}
	var source string
	p.Eval(ctx, `document.getElementById("source").innerText`, &source)
	if !strings.Contains(source, "bundle") {
		t.Errorf("the page says its data comes from %q", source)
	}

	jl := filepath.Join(out, "provenance.jsonl")
	b, err := os.ReadFile(jl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jl, bytes.Replace(b, []byte("reports/q3.md"), []byte("reports/q4.md"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	base = serve()
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=%d", base, l.call)); v != "false" {
		t.Errorf("changed entry in the bundle: data-verified=%s: %s", v, txt)
	}

	// Evidence from a log without witnesses or anchors verifies and says
	// what it lacks.
	ev := filepath.Join(t.TempDir(), "evidence")
	if o, code := runCmd(t, "evidence", "--data", l.data, "--index", fmt.Sprint(l.call), "--out", ev); code != 0 {
		t.Fatalf("evidence: %s", o)
	}
	out = ev
	base = serve()
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=%d", base, l.call)); v != "true" {
		t.Errorf("evidence of a call: data-verified=%s: %s", v, txt)
	}
	var missing []string
	p.Eval(ctx, `[...document.querySelectorAll("#missing li")].map(e => e.innerText)`, &missing)
	if len(missing) == 0 || !strings.Contains(strings.Join(missing, " "), "anchor") {
		t.Errorf("what the evidence lacks, as the page shows it: %q", missing)
	}
}

// TestUIViewEvidence writes the evidence of the claim (with the witness's
// cosignature and the anchor) and opens it with provlog view's server: the
// claim verifies, with its timeline, the witness and the anchor; evidence
// with one byte of the entry changed does not verify.
func TestUIViewEvidence(t *testing.T) {
	l := newUILog(t, true)
	l.close()
	out := filepath.Join(t.TempDir(), "evidence")
	if o, code := runCmd(t, "evidence", "--data", l.data, "--config", l.cfgPath, "--index", fmt.Sprint(l.claim), "--out", out); code != 0 {
		t.Fatalf("evidence: %s", o)
	}
	p, ctx := openPage(t)
	serve := func() string { return serveView(t, ctx, out) }
	base := serve()
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=%d&vkey=%s", base, l.claim, url.QueryEscape(l.vkey)))
	if v != "true" {
		t.Fatalf("claim from the evidence: data-verified=%s: %s", v, txt)
	}
	var got struct {
		Steps, Witnesses, Anchors []string
		Source                    string
	}
	p.Eval(ctx, `({Steps: [...document.querySelectorAll("#timeline li")].map(e => e.innerText),
		Witnesses: [...document.querySelectorAll("#checkpoint tbody tr")].map(e => e.innerText),
		Anchors: [...document.querySelectorAll("#anchors tbody tr")].map(e => e.innerText),
		Source: document.getElementById("source").innerText})`, &got)
	if len(got.Steps) != 3 || len(got.Witnesses) != 2 || !strings.Contains(got.Witnesses[0], "✓ verified with the key you gave") || !strings.Contains(got.Witnesses[1], "✓ cosignature verifies") || len(got.Anchors) != 1 || !strings.Contains(got.Source, "evidence") {
		t.Errorf("the evidence page shows %+v; want 3 steps, the log's signature and w1's cosignature verified, one anchor", got)
	}
	screenshot(t, ctx, p, "ui-evidence.png")
	// The call the claim cites is in the evidence too.
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=%d", base, l.call)); v != "true" {
		t.Errorf("cited call from the evidence: data-verified=%s: %s", v, txt)
	}

	ef := filepath.Join(out, "entry.json")
	b, err := os.ReadFile(ef)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ef, bytes.Replace(b, []byte("observed"), []byte("reviewed"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	base = serve()
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=%d", base, l.claim)); v != "false" {
		t.Errorf("changed entry.json: data-verified=%s: %s", v, txt)
	}
}

// TestUIServe opens /ui/ of a real `provlog serve --http` (behind its
// front's Host and Origin checks) on its embedded defaults: the genesis
// entry verifies.
func TestUIServe(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	base, _ := startServe(t, "--data", data)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	p, ctx := openPage(t)
	if v, txt := verdict(t, ctx, p, base+"/ui/#token="+strings.TrimSpace(string(tok))+"&entry=0"); v != "true" {
		t.Fatalf("genesis entry through provlog serve: data-verified=%s: %s", v, txt)
	}
	// The page also opens as localhost (a loopback name the front allows).
	if v, txt := verdict(t, ctx, p, strings.Replace(base, "127.0.0.1", "localhost", 1)+"/ui/#token="+strings.TrimSpace(string(tok))+"&entry=0"); v != "true" {
		t.Fatalf("as localhost: data-verified=%s: %s", v, txt)
	}
}

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

	"github.com/provlog/provlog/log"
)

// TestUIAgentValuesMarkedAsLogsProbe: the page annotates values an agent
// wrote as if the sidecar had made them. showEntry counts every
// "[redacted]" in the entry's text and says "1 field value was redacted
// before hashing … the log never held them", and render marks each value
// that is the string "[redacted]" "replaced before hashing: the value
// never reached the log"; render also puts "← only the SHA-256 of this
// content is in the log" after every member, at any depth, whose key ends
// in _sha256. An agent that sends, with no redact list configured,
// {"note": "[redacted]", "expected_sha256": "…"} as arguments gets both:
// observed, the page says a field was redacted before hashing and that
// only a hash of the expected_sha256 content is in the log, neither of
// which the sidecar did; the log holds exactly what the agent sent. Fix:
// mark redactions and hashed content only where the entry's format puts
// them (the args' values the call's redaction replaced need a record in
// the entry, e.g. the redacted paths; the _sha256 note only on the
// entry's own top-level members), not on any value of the arguments.
func TestUIAgentValuesMarkedAsLogsProbe(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "check"}, func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		return text("checked"), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf("data: %s\norigin: provlog.example/marks\nactor: alice\nservers:\n  - id: fs\n    url: %s\n", filepath.Join(dir, "data"), down.URL))
	sc := mustOpenSidecar(t, cfg)
	t.Cleanup(sc.close)
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := sc.proxy.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	_, rc := callTool(t, cs, "fs__check", map[string]any{"note": "[redacted]", "expected_sha256": strings.Repeat("ab", 32)})
	r, err := log.ParseReceipt([]byte(rc))
	if err != nil {
		t.Fatal(err)
	}
	call := callOf(t, ctx, sc, r.Index)
	es, _ := sc.store.Entries(ctx, call, call+1)
	if !strings.Contains(string(es[0]), `"note":"[redacted]"`) {
		t.Fatalf("the entry does not hold the agent's literal value: %s", es[0])
	}
	hs := httptest.NewServer(sc.handler())
	t.Cleanup(hs.Close)
	tok, err := os.ReadFile(filepath.Join(cfg.Data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	p, ctx2 := openPage(t)
	v, txt := verdict(t, ctx2, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", hs.URL, strings.TrimSpace(string(tok)), call))
	if v != "true" {
		t.Fatalf("call entry: data-verified=%s: %s", v, txt)
	}
	var entry string
	if err := p.Eval(ctx2, `document.getElementById("entry").innerText`, &entry); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(entry, "redacted before hashing") {
		t.Errorf("the page says the sidecar redacted a value the agent sent as it is: %.600s", entry)
	}
	if strings.Contains(entry, "only the SHA-256 of this content is in the log") {
		t.Errorf("the page says only a hash of an argument the agent sent whole is in the log: %.600s", entry)
	}
}

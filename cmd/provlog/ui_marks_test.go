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

// TestUIAgentValuesMarkedAsLogs: the page must not annotate values an
// agent wrote as the sidecar's doing. An agent that sends, with no redact
// list configured, {"note": "[redacted]", "expected_sha256": "…"} as
// arguments is recorded exactly as it sent them; the page must not say a
// field was redacted before hashing (a call entry does not record which
// values the sidecar replaced, so the note says either may be), nor that
// only a hash of expected_sha256's content is in the log (that note is
// for the entry's own top-level members, args_sha256, result_sha256).
func TestUIAgentValuesMarkedAsLogs(t *testing.T) {
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
	cs, closeClient := memClient(t, sc, "agent")
	t.Cleanup(closeClient)
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

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// escapeToolLog records, through a real sidecar, one call of a tool
// whose name a downstream server gave with terminal escapes in it; it
// returns the stopped sidecar's data dir and config, and the call's
// entry's index.
func escapeToolLog(t *testing.T, name string) (data, cfgPath string, index uint64) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: name, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("answer " + in.Q), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	cfgPath = filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf("data: %s\nservers:\n  - id: fx\n    url: %s\n", data, down.URL))
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := sc.proxy.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__" + name, Arguments: map[string]any{"q": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("calling the tool: %v %+v", err, res)
	}
	rc, err := log.ParseReceipt([]byte(res.Meta["dev.provlog/receipt"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	index = callOf(t, ctx, sc, rc.Index)
	cs.Close()
	sc.close()
	return data, cfgPath, index
}

// TestReplayToolNameEscapes: a downstream MCP server names a tool with
// terminal escapes in it (the go-sdk only logs an invalid tool name); the
// proxy offers it, an agent calls it, and the call entry records the name
// as the server gave it. `provlog replay` prints the name in its report,
// through log.Printable, so that bytes a downstream server chose cannot
// act on the auditor's terminal.
func TestReplayToolNameEscapes(t *testing.T) {
	const name = "lookup\x1b]0;replay clean\x07\x1b[2K"
	data, cfgPath, _ := escapeToolLog(t, name)
	ctx := context.Background()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--single-run"}, &out, &errb)
	all := out.String() + errb.String()
	if !strings.Contains(all, "lookup") {
		t.Fatalf("replay (exit %d) reports no call of the tool: %s", code, all)
	}
	if i := strings.IndexByte(all, 0x1b); i >= 0 {
		t.Errorf("provlog replay prints a terminal escape a downstream server put in a tool name raw: %q", all[max(0, i-60):min(len(all), i+60)])
	}
}

// TestEvidenceToolNameEscapes: the same tool name, in `provlog evidence`
// and `provlog verify-evidence`: both print the evidence report, whose
// every line goes through log.Printable (the entry's tool and actor, and
// what the directory holds: the manifest's missing lines, Rekor URLs;
// anchor/evidence TestReportStringEscapes covers those).
func TestEvidenceToolNameEscapes(t *testing.T) {
	const name = "lookup\x1b]0;evidence verified\x07\x1b[2K"
	data, _, index := escapeToolLog(t, name)
	ev := filepath.Join(t.TempDir(), "ev")
	for _, args := range [][]string{
		{"evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev},
		{"verify-evidence", "--vkey", filepath.Join(data, "log.vkey"), ev},
	} {
		out, code := runCmd(t, args...)
		if code != 0 || !strings.Contains(out, "lookup") {
			t.Fatalf("provlog %s: exit %d: %s", args[0], code, out)
		}
		if i := strings.IndexByte(out, 0x1b); i >= 0 {
			t.Errorf("provlog %s prints a terminal escape a downstream server put in a tool name raw: %q", args[0], out[max(0, i-60):min(len(out), i+60)])
		}
	}
}

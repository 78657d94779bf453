package main

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestObservedClaimOverMCP: an agent on a running sidecar, calling a real
// MCP server (go-sdk's everything-server) and the task tools over HTTP,
// gets report_completion's observed claims refused as tool errors that
// say what to do, and nothing written, when one cites nothing, only a
// failed call (test_error_handling), or a call cited by an observed claim
// on another task it owns; the claim citing a call that succeeded is
// written.
func TestObservedClaimOverMCP(t *testing.T) {
	base, token := startWithEverything(t)
	cs := connectHTTP(t, base, token)
	ctx := context.Background()
	var tasks []string
	for _, title := range []string{"one", "two"} {
		created, _ := callTool(t, cs, "create_task", map[string]any{"title": title})
		tasks = append(tasks, created["task_id"].(string))
		callTool(t, cs, "accept_task", map[string]any{"task_id": tasks[len(tasks)-1]})
	}
	receipt := func(name string, wantError bool) uint64 {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil || res.IsError != wantError {
			t.Fatalf("%s: %v, is_error %v: %s", name, err, res != nil && res.IsError, contentText(res))
		}
		rc, err := log.ParseReceipt([]byte(res.Meta["dev.provlog/receipt"].(string)))
		if err != nil {
			t.Fatal(err)
		}
		return rc.Index
	}
	ok, failed := receipt("test_simple_text", false), receipt("test_error_handling", true)
	refused := func(task string, evidence []uint64, want string) {
		t.Helper()
		before := logSize(t, base)
		args := map[string]any{"task_id": task, "provenance": "observed", "summary": "done"}
		if evidence != nil {
			args["evidence"] = evidence
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "report_completion", Arguments: args})
		if err != nil || !res.IsError || !strings.Contains(contentText(res), want) {
			t.Errorf("observed claim citing %v: %v, %s; want a tool error saying %q", evidence, err, contentText(res), want)
		}
		if after := logSize(t, base); after != before {
			t.Errorf("the refused claim citing %v: log size %s -> %s", evidence, before, after)
		}
	}
	refused(tasks[0], nil, "must cite evidence")
	refused(tasks[0], []uint64{failed}, "cites failed")
	callTool(t, cs, "report_completion", map[string]any{"task_id": tasks[0], "provenance": "observed", "summary": "done", "evidence": []uint64{failed, ok}})
	refused(tasks[1], []uint64{ok}, tasks[0])
}

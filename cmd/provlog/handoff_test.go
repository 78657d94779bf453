package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addToken runs 'provlog token add' and returns the token it printed.
func addToken(t *testing.T, cfg, actor string) string {
	t.Helper()
	out, code := runCmd(t, "token", "add", "--config", cfg, "--actor", actor)
	if code != 0 {
		t.Fatalf("token add: %s", out)
	}
	return strings.SplitN(out, "\n", 2)[0]
}

// TestHandoffToUnknownActor: with actors configured, handoff_task to an
// actor the config does not know is refused, and so is create_task
// offered to one, unless handoff_any_actor; an id no client may act as
// is refused either way.
func TestHandoffToUnknownActor(t *testing.T) {
	for _, open := range []bool{false, true} {
		dir := t.TempDir()
		text := "data: ./d\n"
		if open {
			text += "handoff_any_actor: true\n"
		}
		cfg := filepath.Join(dir, "servers.yaml")
		os.WriteFile(cfg, []byte(text), 0o600)
		alice := addToken(t, cfg, "alice")
		addToken(t, cfg, "bob")
		base, _ := startServe(t, "--config", cfg)
		cs := connectHTTP(t, base, alice)
		created, _ := callTool(t, cs, "create_task", map[string]any{"title": "t"})
		callTool(t, cs, "accept_task", map[string]any{"task_id": created["task_id"]})
		// An id no token could act as is refused even where any actor may
		// receive a handoff: "bob\u200b" reads as bob in every report.
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "handoff_task",
			Arguments: map[string]any{"task_id": created["task_id"], "to": "bob\u200b"}})
		if err != nil || !res.IsError || !strings.Contains(contentText(res), "U+200B") {
			t.Fatalf("handoff to an id with U+200B: %v, %+v", err, res)
		}
		// Nor may a task go to an id that reads as provlog's own
		// (Cyrillic o).
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "handoff_task",
			Arguments: map[string]any{"task_id": created["task_id"], "to": "pr\u043evlog.operator"}})
		if err != nil || !res.IsError || !strings.Contains(contentText(res), "looks like one of the sidecar's own") {
			t.Fatalf("handoff to an id that reads as provlog's: %v, %+v", err, res)
		}
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "handoff_task",
			Arguments: map[string]any{"task_id": created["task_id"], "to": "mallory"}})
		if err != nil {
			t.Fatal(err)
		}
		if !open && (!res.IsError || !strings.Contains(contentText(res), `no actor "mallory" is configured here`)) {
			t.Fatalf("handoff to an unknown actor: error %v: %s", res.IsError, contentText(res))
		}
		if open && res.IsError {
			t.Fatalf("handoff_any_actor: true, but the handoff was refused: %s", contentText(res))
		}
		if !open {
			callTool(t, cs, "handoff_task", map[string]any{"task_id": created["task_id"], "to": "bob"})
		}
		// create_task's offer_to reserves the task as a handoff does.
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_task",
			Arguments: map[string]any{"title": "offered", "offer_to": "mallory"}})
		if err != nil {
			t.Fatal(err)
		}
		if !open && (!res.IsError || !strings.Contains(contentText(res), `offer_to: no actor "mallory" is configured here`)) {
			t.Fatalf("offer to an unknown actor: error %v: %s", res.IsError, contentText(res))
		}
		if open && res.IsError {
			t.Fatalf("handoff_any_actor: true, but the offer was refused: %s", contentText(res))
		}
	}
}

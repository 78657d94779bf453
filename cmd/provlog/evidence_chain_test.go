package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestEvidenceDroppedTaskEntry: a task created and accepted by alice,
// handed off to bob, accepted and claimed by him, through a real serve;
// provlog evidence for the claim holds its task's history. A forger drops
// the handoff that moved ownership from the middle of it and rewrites
// manifest.json to match; verify-evidence must refuse the directory,
// naming the entry that is missing.
func TestEvidenceDroppedTaskEntry(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte("data: "+data+"\n"), 0o600)
	alice := addToken(t, cfg, "alice")
	bob := addToken(t, cfg, "bob")
	base, stop := startServe(t, "--config", cfg)
	as := connectHTTP(t, base, alice)
	created, _ := callTool(t, as, "create_task", map[string]any{"title": "write the report"})
	id := created["task_id"].(string)
	callTool(t, as, "accept_task", map[string]any{"task_id": id})
	_, hrc := callTool(t, as, "handoff_task", map[string]any{"task_id": id, "to": "bob"})
	bs := connectHTTP(t, base, bob)
	callTool(t, bs, "accept_task", map[string]any{"task_id": id})
	_, crc := callTool(t, bs, "report_completion", map[string]any{"task_id": id, "provenance": "reported", "summary": "done", "source": "alice"})
	as.Close()
	bs.Close()
	stop()
	handoff := receiptIndex(t, hrc)
	claim := receiptIndex(t, crc)

	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", strconv.FormatUint(claim, 10), "--out", ev, "--config", cfg); code != 0 {
		t.Fatalf("provlog evidence: exit %d\n%s", code, out)
	}
	vkey := filepath.Join(data, logVKeyFile)
	if out, code := runCmd(t, "verify-evidence", "--vkey", vkey, ev); code != 0 || !strings.Contains(out, "task history: whole from the task's creation") {
		t.Fatalf("verify-evidence of the whole evidence: exit %d, want OK saying the task's history is whole\n%s", code, out)
	}

	// The forger's edit: the handoff's files gone, the manifest rewritten.
	mb, err := os.ReadFile(filepath.Join(ev, evidence.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m evidence.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	var kept []evidence.ContextEntry
	tasks := 0
	for _, ce := range m.Context {
		if strings.HasPrefix(ce.Role, "task.") {
			tasks++
		}
		if ce.Index != handoff {
			kept = append(kept, ce)
		}
	}
	if len(kept) != len(m.Context)-1 {
		t.Fatalf("the evidence does not hold the handoff, entry %d: %+v", handoff, m.Context)
	}
	m.Context = kept
	for _, ext := range []string{".json", ".tlog-proof"} {
		name := fmt.Sprintf("%s/%d%s", evidence.ContextDir, handoff, ext)
		if err := os.Remove(filepath.Join(ev, name)); err != nil {
			t.Fatal(err)
		}
		delete(m.Files, name)
	}
	mb, _ = json.MarshalIndent(&m, "", "  ")
	if err := os.WriteFile(filepath.Join(ev, evidence.ManifestFile), append(mb, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", vkey, ev)
	if code == 0 {
		t.Fatalf("verify-evidence accepts the evidence of the claim at entry %d with the handoff (entry %d) dropped, %d of its %d task entries left:\n%s",
			claim, handoff, tasks-1, tasks, out)
	}
	if want := fmt.Sprintf("entry %d", handoff); !strings.Contains(out, want) {
		t.Errorf("verify-evidence refuses, but does not name the dropped %s:\n%s", want, out)
	}
}

func receiptIndex(t *testing.T, rc string) uint64 {
	t.Helper()
	r, err := log.ParseReceipt([]byte(rc))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	return r.Index
}

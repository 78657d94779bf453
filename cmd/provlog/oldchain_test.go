package main

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestOldTaskHistoryUnlinked: a log an older provlog wrote, whose task
// entries name no previous entry, audits, exports and verifies as before;
// the sidecar opened on it links its next entry of the task to the old
// one, and the evidence of a claim after it verifies and says the history
// before that old entry is not linked. A task entry whose prev names
// another entry than its task's previous one is a task_prev violation
// provlog audit and verify-bundle report.
func TestOldTaskHistoryUnlinked(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	sc := mustOpenSidecar(t, &Config{Data: data})
	appendEntry := func(m interface{ Marshal() ([]byte, error) }) (uint64, string) {
		t.Helper()
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := sc.seq.Append(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return rc.Index, hex.EncodeToString(log.LeafHash(b))
	}
	now := time.Now()
	id := "t_" + strings.Repeat("a1", 16)
	created, createdLeaf := appendEntry(&log.TaskEntry{Kind: log.KindTaskCreate, Time: now, Actor: "alice", TaskID: id, Title: "old"})
	accepted, _ := appendEntry(&log.TaskEntry{Kind: log.KindTaskAccept, Time: now, Actor: "alice", TaskID: id})
	sc.close()
	// The engine saved its index without the entries appended past it.
	os.Remove(filepath.Join(data, tasksIndexFile))
	if out, code := runCmd(t, "audit", "--data", data); code != 0 || !strings.Contains(out, "1 tasks rebuilt") {
		t.Fatalf("audit of the old log: exit %d:\n%s", code, out)
	}
	if out, code := runCmd(t, "verify-bundle", exportBundle(t, data, "")); code != 0 {
		t.Fatalf("verify-bundle of the old log's export: exit %d:\n%s", code, out)
	}

	sc = mustOpenSidecar(t, &Config{Data: data})
	mustResult(t)(sc.tasks.Handoff(ctx, "alice", opp.HandoffArgs{TaskID: id, To: "bob"}))
	mustResult(t)(sc.tasks.Accept(ctx, "bob", id))
	claim := mustResult(t)(sc.tasks.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "done", Source: "alice"})).Index
	sc.close()
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", strconv.FormatUint(claim, 10), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: exit %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", filepath.Join(data, logVKeyFile), ev)
	if want := "task history: not linked before entry " + strconv.FormatUint(accepted, 10); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("verify-evidence of a claim after the old accept at %d: exit %d, want OK saying %q:\n%s", accepted, code, want, out)
	}

	// A claim naming the create as its previous entry, not the claim.
	sc = mustOpenSidecar(t, &Config{Data: data})
	forged, _ := appendEntry(&log.TaskEntry{Kind: log.KindTaskClaim, Time: time.Now(), Actor: "bob", TaskID: id, Provenance: "reported", Summary: "again", Source: "alice",
		Prev: &log.TaskEntryRef{Index: created, LeafHash: createdLeaf}})
	sc.close()
	out, code = runCmd(t, "audit", "--data", data)
	if want := "entry " + strconv.FormatUint(forged, 10); code == 0 || !strings.Contains(out, opp.RulePrev) || !strings.Contains(out, want) {
		t.Fatalf("audit of a log with a claim whose prev is wrong at %d: exit %d, want it to fail naming %s and %q:\n%s", forged, code, opp.RulePrev, want, out)
	}
	// An export carries the entry; verify-bundle rebuilds the tasks and
	// refuses it too.
	out, code = runCmd(t, "verify-bundle", exportBundle(t, data, ""))
	if code == 0 || !strings.Contains(out, opp.RulePrev) {
		t.Fatalf("verify-bundle of an export with a claim whose prev is wrong at %d: exit %d, want it to fail naming %s:\n%s", forged, code, opp.RulePrev, out)
	}
}

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestOldObservedClaims: a data dir whose log an older provlog wrote with
// observed claims the engine now refuses when written (one citing
// nothing, one citing only a failed call, one call backing claims on two
// tasks) audits, lists, shows and exports as it did: the rules are
// checked when a claim is written, not when the log is read. The sidecar
// opened on it refuses a new claim of each kind and writes nothing. The
// data dir of 5e84559, whose saved task index is of an older layout,
// still audits and opens (replaying the log).
func TestOldObservedClaims(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	sc := mustOpenSidecar(t, &Config{Data: data})
	appendEntry := func(m interface{ Marshal() ([]byte, error) }) uint64 {
		t.Helper()
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := sc.seq.Append(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return rc.Index
	}
	now := time.Now()
	tasks := []string{"t_" + strings.Repeat("a1", 16), "t_" + strings.Repeat("b2", 16), "t_" + strings.Repeat("c3", 16)}
	for _, id := range tasks {
		appendEntry(&log.TaskEntry{Kind: log.KindTaskCreate, Time: now, Actor: "alice", TaskID: id, Title: "old"})
		appendEntry(&log.TaskEntry{Kind: log.KindTaskAccept, Time: now, Actor: "bob", TaskID: id})
	}
	call := appendEntry(&log.CallEntry{Time: now, Actor: "bob", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)})
	appendEntry(&log.CallResultEntry{Time: now, Actor: "bob", Call: call, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
	failed := appendEntry(&log.CallEntry{Time: now, Actor: "bob", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)})
	appendEntry(&log.CallResultEntry{Time: now, Actor: "bob", Call: failed, IsError: true, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
	claim := func(id string, ev ...uint64) {
		appendEntry(&log.TaskEntry{Kind: log.KindTaskClaim, Time: now, Actor: "bob", TaskID: id, Provenance: string(opp.Observed), Summary: "done", Evidence: ev})
	}
	claim(tasks[0])
	claim(tasks[1], failed)
	claim(tasks[2], call)
	claim(tasks[0], call)
	sc.close()

	if out, code := runCmd(t, "audit", "--data", data); code != 0 || !strings.Contains(out, "3 tasks rebuilt") {
		t.Fatalf("audit of the old log: exit %d:\n%s", code, out)
	}
	if out, code := runCmd(t, "tasks", "--data", data, "list"); code != 0 || strings.Count(out, "completed") != 3 {
		t.Fatalf("tasks list of the old log: exit %d:\n%s", code, out)
	}
	for _, id := range tasks {
		if out, code := runCmd(t, "tasks", "--data", data, "show", id); code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "observed") {
			t.Fatalf("tasks show %s: exit %d:\n%s", id, code, out)
		}
	}
	if out, code := runCmd(t, "verify-bundle", exportBundle(t, data, "")); code != 0 {
		t.Fatalf("verify-bundle of the old log's export: exit %d:\n%s", code, out)
	}

	sc = mustOpenSidecar(t, &Config{Data: data})
	defer sc.close()
	fresh := mustResult(t)(sc.tasks.Create(ctx, "alice", opp.CreateArgs{Title: "new"})).Task.ID
	mustResult(t)(sc.tasks.Accept(ctx, "bob", fresh))
	before := sc.size()
	for _, ev := range [][]uint64{nil, {failed}, {call}} {
		_, err := sc.tasks.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: fresh, Provenance: "observed", Summary: "done", Evidence: ev})
		if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleEvidence {
			t.Errorf("a new observed claim citing %v: %v, want it refused by rule %s", ev, err, opp.RuleEvidence)
		}
	}
	if n := sc.size() - before; n != 0 {
		t.Errorf("the refused claims wrote %d entries", n)
	}

	old := copyOldDataDir(t)
	if out, code := runCmd(t, "audit", "--data", old); code != 0 {
		t.Fatalf("audit of the data dir of 5e84559: exit %d:\n%s", code, out)
	}
	osc := mustOpenSidecar(t, &Config{Data: old, Actor: "local"})
	defer osc.close()
	if from, err := osc.tasks.Resumed(); from != 0 || err == nil {
		t.Errorf("the data dir of 5e84559: resumed from %d (%v), want its older task index replaced by a replay", from, err)
	}
}

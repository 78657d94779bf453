package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/witness"
)

// TestVerifyBundleTaskRules: a log whose task entries break the ownership
// and provenance rules (bob accepts a task offered to carol, an entry the
// sidecar never writes) fails provlog audit; its bundle, exported from
// entry 0, fails verify-bundle too, naming the entry and the rule, as
// audit does. Before, verify-bundle said OK: a regulator holding only the
// bundle learnt less than the operator's audit. A bundle that starts later
// says the rules were not applied.
func TestVerifyBundleTaskRules(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 2)
	var bad uint64
	appendToDataDir(t, data, func(l appendLog) {
		size, _ := l.LatestSize(ctx)
		eng, err := opp.Open(ctx, l, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := eng.Create(ctx, "alice", opp.CreateArgs{Title: "t", OfferTo: "carol"})
		if err != nil {
			t.Fatal(err)
		}
		bad = appendEntryTo(t, l, &log.Entry{Kind: opp.KindAccept, Time: time.Now(), Actor: "bob", Fields: map[string]any{"task_id": res.Task.ID}})
	})

	if out, code := runCmd(t, "audit", "--data", data); code != 1 || !strings.Contains(out, "breaks rule reserved") {
		t.Fatalf("audit: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-bundle", exportBundle(t, data, ""))
	if want := fmt.Sprintf("FAILED entry %d (task.accept)", bad) + ": breaks rule reserved"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("verify-bundle of the whole log: %d, want 1 and %q\n%s", code, want, out)
	}
	partial := filepath.Join(t.TempDir(), "bundle")
	if msg, code := runCmd(t, "export", "--data", data, "--out", partial, "--from", "1"); code != 0 {
		t.Fatalf("export --from 1: %d %s", code, msg)
	}
	out, code = runCmd(t, "verify-bundle", partial)
	if code != 0 || !strings.Contains(out, "\ntasks: the ownership and provenance rules not applied (the bundle starts at entry 1; they need the log from its first)\n") {
		t.Errorf("verify-bundle of [1, size): %d\n%s", code, out)
	}
}

// appendToDataDir opens a stopped sidecar's data dir for writing and
// hands fn the log as the task engine sees it.
func appendToDataDir(t *testing.T, data string, fn func(appendLog)) {
	t.Helper()
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := logpebble.Open(filepath.Join(data, dbDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seq, err := server.OpenSequencer(context.Background(), store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	fn(appendLog{seq, store})
}

// appendEntryTo appends e to l and returns its index.
func appendEntryTo(t *testing.T, l appendLog, e interface{ Marshal() ([]byte, error) }) uint64 {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Append(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return rc.Index
}

// withActor is entry b, marshalled with the actor "forged", rewritten to
// name actor instead: the bytes a writer of the log that skips provlog's
// checks (a forger with the key, an old or hostile build) would append,
// which no marshaller of package log writes.
func withActor(t *testing.T, b []byte, actor string) []byte {
	t.Helper()
	q, err := json.Marshal(actor)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte(`"actor":"forged"`)) != 1 {
		t.Fatalf("entry %s: no actor forged", b)
	}
	out, err := log.Canonicalize(bytes.Replace(b, []byte(`"actor":"forged"`), append([]byte(`"actor":`), q...), 1))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuditSaysWitnessConflicts: a log holding a witness.conflict entry
// (a witness said it holds another history) is consistent, so audit
// passes, but says so, naming the entry. Before, it said OK and nothing
// more.
func TestAuditSaysWitnessConflicts(t *testing.T) {
	data := makeDataDir(t, 2)
	var at uint64
	appendToDataDir(t, data, func(l appendLog) {
		at = appendEntryTo(t, l, &witness.ConflictEntry{Time: time.Now(), Witness: "witness.test/w1", Status: 409,
			CheckpointSize: 3, WitnessSize: 7, Detail: "7", Checkpoint: "provlog.test/export\n3\nAAAA\n\n"})
	})
	out, code := runCmd(t, "audit", "--data", data)
	if want := fmt.Sprintf("WARNING: 1 witness.conflict entries (%d): a witness said it holds another history of this log", at); code != 0 || !strings.Contains(out, want) {
		t.Errorf("audit: %d, want 0 and %q\n%s", code, want, out)
	}
}

// TestAuditSaysUnlistedTools: a call naming a tool definition no tools
// entry before it lists is consistent, so audit passes, but says so,
// naming the entry (an older provlog wrote such calls after a tools entry
// failed; before, audit said nothing).
func TestAuditSaysUnlistedTools(t *testing.T) {
	data := makeDataDir(t, 2)
	var at uint64
	appendToDataDir(t, data, func(l appendLog) {
		at = appendEntryTo(t, l, &log.CallEntry{Time: time.Now(), Actor: "alice", Server: "fs", Tool: "write", ToolSHA256: strings.Repeat("ab", 32), Args: log.CanonicalJSON(`{}`)})
	})
	out, code := runCmd(t, "audit", "--data", data)
	if want := fmt.Sprintf("WARNING: 1 calls (%d) name a tool_sha256 no earlier tools entry of their server lists", at); code != 0 || !strings.Contains(out, want) {
		t.Errorf("audit: %d, want 0 and %q\n%s", code, want, out)
	}
}

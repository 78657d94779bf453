package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
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
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := logpebble.Open(filepath.Join(data, dbDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := appendLog{seq, store}
	size, _ := l.LatestSize(ctx)
	eng, err := opp.Open(ctx, l, size, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Create(ctx, "alice", opp.CreateArgs{Title: "t", OfferTo: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&log.Entry{Kind: opp.KindAccept, Time: time.Now(), Actor: "bob", Fields: map[string]any{"task_id": res.Task.ID}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := seq.Append(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	seq.Close()
	store.Close()

	if out, code := runCmd(t, "audit", "--data", data); code != 1 || !strings.Contains(out, "breaks rule reserved") {
		t.Fatalf("audit: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-bundle", exportBundle(t, data, ""))
	if want := fmt.Sprintf("FAILED entry %d (task.accept)", rc.Index) + ": breaks rule reserved"; code != 1 || !strings.Contains(out, want) {
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

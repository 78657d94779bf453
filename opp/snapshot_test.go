package opp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/opp"
)

// TestSnapshot: an engine opened on a saved index replays only the entries
// after it and holds the state a full replay holds; a torn, changed or
// foreign snapshot, or one longer than the log, is not used, and the state
// is still the log's.
func TestSnapshot(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "tasks.idx")
	e, err := opp.Open(ctx, f.l, f.l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if from, err := e.Resumed(); from != 0 || err == nil {
		t.Fatalf("no snapshot yet, but Resumed says %d, %v", from, err)
	}
	saved := f.l.Size()
	if err := e.SaveIndex(ctx, saved); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, "alice", opp.CreateArgs{Title: "late"}); err == nil {
		t.Fatal("a saved engine took a write")
	}
	// More happens after the snapshot, on old tasks and a new one.
	e = newEngine(t, f.l)
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "observed", Summary: "s", Evidence: []uint64{f.bobCallDuring}}))
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "after"})).Task.ID
	mustOK(t)(e.Accept(ctx, "carol", id))

	open := func() *opp.Engine {
		t.Helper()
		e2, err := opp.Open(ctx, f.l, f.l.Size(), &opp.Options{IndexFile: path})
		if err != nil {
			t.Fatal(err)
		}
		checkRebuild(t, f.l, e2)
		return e2
	}
	e2 := open()
	if from, err := e2.Resumed(); from != saved || err != nil {
		t.Fatalf("Resumed: %d, %v; want %d, nil", from, err, saved)
	}
	if _, err := e2.Accept(ctx, "dave", id); ruleOf(err) != opp.RuleOwned {
		t.Fatalf("accept of a task accepted after the snapshot: %v", err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(why string) {
		t.Helper()
		e3 := open()
		if from, err := e3.Resumed(); from != 0 || err == nil || !strings.Contains(err.Error(), why) {
			t.Fatalf("Resumed: %d, %v; want 0 and an error saying %q", from, err, why)
		}
	}
	flipped := append([]byte{}, good...)
	flipped[len(flipped)/2] ^= 1
	os.WriteFile(path, flipped, 0o600)
	refused("") // by a structural check, or else the checksum
	os.WriteFile(path, good[:len(good)-40], 0o600)
	refused("")
	flipped = append([]byte{}, good...)
	flipped[len(flipped)-1] ^= 1 // the trailer itself
	os.WriteFile(path, flipped, 0o600)
	refused("checksum")

	// A snapshot of another log of the same size is not this log's.
	other := newFixture(t)
	for other.l.Size() < saved {
		appendCall(t, other.l, "x")
	}
	oe, err := opp.Open(ctx, other.l, other.l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := oe.SaveIndex(ctx, saved); err != nil {
		t.Fatal(err)
	}
	refused("not the one")
	// Nor is one that covers more than the log holds.
	for other.l.Size() < f.l.Size()+5 {
		appendCall(t, other.l, "x")
	}
	if err := oe.SaveIndex(ctx, other.l.Size()); err != nil {
		t.Fatal(err)
	}
	refused("more than the log")
}

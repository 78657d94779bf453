package bundle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

// failAppend is a log whose appends fail.
type failAppend struct{ online.Log }

func (failAppend) Append(context.Context, []byte) (*log.Receipt, error) {
	return nil, errors.New("not appended here")
}

// oldRecord anchors the fixture's newest checkpoint as a provlog that
// kept no Rekor consistency proof did (a runner on a store of its own
// links to nothing), ties the record to the fixture's newest by the log's
// consistency proof, stores it with the fixture's records and logs its
// anchor entry.
func (f *fixture) oldRecord(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	own, err := anchor.OpenStore(f.anchors)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := own.Last()
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := anchor.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := online.NewRunner(ctx, online.Options{Config: f.anchorCfg, Log: failAppend{f.seq}, Tree: f.store, Records: tmp,
		Signer: f.anchorKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := r.AnchorNow(ctx)
	if st == nil {
		t.Fatal("no record made")
	}
	rec := st.Record
	proof, err := log.ProveConsistency(ctx, f.store, prev.Record.Size, rec.Size)
	if err != nil {
		t.Fatal(err)
	}
	rec.Previous = &anchor.Consistency{Size: prev.Record.Size, Root: prev.Record.Root, Proof: proof}
	if st, err = own.Put(rec); err != nil {
		t.Fatal(err)
	}
	sidecar, err := own.Sidecar()
	if err != nil {
		t.Fatal(err)
	}
	b, err := anchor.MarshalEntry(st, sidecar, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.seq.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// TestBundleRekorFork: a bundle holds two anchor records (made before
// records kept Rekor's consistency proof) whose Rekor checkpoints of
// size 1 have different roots: Rekor forgot its tree between them and
// showed two histories. Each record verifies on its own; verify-bundle
// must compare them as the audit does and report a Rekor fork. On the
// base only provlog audit compared them, and the bundle verified.
// (anchor.NewBundleVerifier, the check cmd/provlog passes, is new.)
func TestBundleRekorFork(t *testing.T) {
	f := newFixture(t, 3, true)
	f.rekor.SetFault(fakerekor.Rollback)
	f.oldRecord(t)
	dir := f.export(t, 0, 0)
	rep, err := bundle.Verify(context.Background(), dir, anchor.NewBundleVerifier())
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") {
		t.Fatalf("two records whose Rekor checkpoints of size 1 differ: verify-bundle %v (report %d anchors), want a Rekor fork", err, rep.Anchors)
	}
}

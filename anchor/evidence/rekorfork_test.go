package evidence_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
)

// storeUnlinked anchors the log's latest checkpoint as a provlog that
// kept no Rekor consistency proof did (a runner on a store of its own,
// which links to nothing), links the record to the newest stored one by
// the log's consistency proof and stores it.
func (l *testLog) storeUnlinked() *anchor.Stored {
	l.t.Helper()
	ctx := context.Background()
	prev, err := l.records.Last()
	if err != nil || prev == nil {
		l.t.Fatalf("no record before: %v", err)
	}
	own, err := anchor.OpenStore(l.t.TempDir())
	if err != nil {
		l.t.Fatal(err)
	}
	r, err := online.NewRunner(ctx, online.Options{Config: l.resolved, Log: cosigningLog{l.seq, []note.Signer{l.signer, l.witness}},
		Tree: l.store, Records: own, Signer: l.key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		l.t.Fatal(err)
	}
	st, err := r.AnchorNow(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	rec := st.Record
	proof, err := log.ProveConsistency(ctx, l.store, prev.Record.Size, rec.Size)
	if err != nil {
		l.t.Fatal(err)
	}
	rec.Previous = &anchor.Consistency{Size: prev.Record.Size, Root: prev.Record.Root, Proof: proof}
	if st, err = l.records.Put(rec); err != nil {
		l.t.Fatal(err)
	}
	return st
}

// TestRekorForkedRecordNotTarget: two records of a data dir carry Rekor
// checkpoints of one tree and size with different roots (Rekor forgot its
// tree between them, and the later record, made before uploads were
// linked, keeps no proof to be refused by): provlog audit fails the later
// record as a Rekor fork. Evidence for an entry only it covers must not
// be anchored by it, or verify-evidence, which holds that one record and
// can compare its Rekor checkpoint with no other, says OK where the
// audit fails. On the base the forked record was the target and the
// directory verified.
func TestRekorForkedRecordNotTarget(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := map[string]any{"server": "fs", "tool": "write_file"}
	l.append(log.KindCall, "alice", call)
	l.anchorNow()
	x := l.append(log.KindCall, "alice", call)
	l.rekor.SetFault(fakerekor.Rollback)
	forked := l.storeUnlinked()
	l.rekor.SetFault(fakerekor.OK)

	v, err := note.NewVerifier(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	_, err = anchor.AuditAll(ctx, l.records.Dir(), anchor.AuditOptions{Verifier: v, AnchorKey: &l.key.PublicKey, Trust: l.trust})
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") || !strings.Contains(err.Error(), forked.Name) {
		t.Fatalf("audit of the data dir: %v; want %s failed as a Rekor fork", err, forked.Name)
	}

	var sk skips
	dir := filepath.Join(t.TempDir(), "ev")
	m, err := evidence.Write(ctx, dir, sk.options(l.options(x)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Anchored {
		t.Errorf("evidence of entry %d is anchored by the record of size %d (%s), which the audit fails as a Rekor fork; skipped %q", x, m.Size, forked.Name, sk)
	}
	if len(sk) != 1 || !strings.HasPrefix(sk[0], forked.Name+": ") || !strings.Contains(sk[0], "Rekor fork") {
		t.Errorf("skipped %q, want %s named as a Rekor fork", sk, forked.Name)
	}
	if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
		t.Errorf("the directory written does not verify: %v", err)
	}
}

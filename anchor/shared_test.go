package anchor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
)

// TestAuditSharedLog: on a log shared by several sidecars, an anchor
// entry naming another sidecar, whose record is in that sidecar's data
// dir, is counted, not failed (it failed: "names record …, which is not
// stored"); on a log of one data dir it still fails, and so does an entry
// of this data dir's sidecar whose record is missing.
func TestAuditSharedLog(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, false)
	st, err := e.runner(nil).AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.records.Sidecar()
	if err != nil || len(own) != 16 {
		t.Fatalf("sidecar id %q, %v", own, err)
	}
	if f := e.anchorEntries(); len(f) != 1 || f[0].Sidecar != own {
		t.Fatalf("anchor entries %+v, want one naming sidecar %s", f, own)
	}
	// Another sidecar's entry: a record of its own, kept elsewhere.
	other := *st
	other.Name, other.SHA256 = "00000000000000000004-0123456789abcdef.json", strings.Repeat("01", 32)
	b, err := anchor.MarshalEntry(&other, "fedcba9876543210", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.seq.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	audit := func(shared bool) (*anchor.AuditReport, error) {
		return anchor.AuditAll(ctx, e.records.Dir(), anchor.AuditOptions{Verifier: e.verifier, AnchorKey: &e.key.PublicKey,
			Trust: e.resolved.Trust, Log: e.store, Size: e.size(), Shared: shared})
	}
	if rep, err := audit(true); err != nil || rep.Elsewhere != 1 || rep.Verified != 1 || rep.Entries != 2 {
		t.Errorf("audit of the shared log: %+v %v", rep, err)
	}
	if _, err := audit(false); err == nil || !strings.Contains(err.Error(), "which is not stored") {
		t.Errorf("audit of a log of one data dir with an entry whose record is elsewhere: %v", err)
	}
	os.Remove(filepath.Join(e.records.Dir(), st.Name))
	if _, err := audit(true); err == nil || !strings.Contains(err.Error(), st.Name+" of this data dir's sidecar "+own+", which is not stored") {
		t.Errorf("audit of the shared log with this sidecar's record deleted: %v", err)
	}
}

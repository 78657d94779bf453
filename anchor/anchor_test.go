package anchor_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/log/server"
)

func TestAnchorNowAndAudit(t *testing.T) {
	e := newEnv(t, 2, true)
	r := e.runner(nil)
	ctx := context.Background()

	size0 := e.size()
	st, err := r.AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := st.Record
	if rec.Size != size0 || len(rec.Timestamps) != 2 || len(rec.Tlogs) != 1 || rec.Previous != nil {
		t.Fatalf("record: size %d (want %d), %d timestamps, %d tlogs, previous %v", rec.Size, size0, len(rec.Timestamps), len(rec.Tlogs), rec.Previous)
	}
	if e.size() != size0+1 {
		t.Fatalf("log size %d after anchoring, want %d (one anchor entry)", e.size(), size0+1)
	}
	ents := e.anchorEntries()
	if len(ents) != 1 || ents[0].Record != st.Name || ents[0].RecordHash != st.SHA256 || ents[0].Size != size0 ||
		len(ents[0].Timestamps) != 2 || len(ents[0].Tlogs) != 1 || ents[0].Tlogs[0].LogIndex != 0 {
		t.Fatalf("anchor entries: %+v", ents)
	}
	v, err := anchor.Verify(ctx, rec, e.verifier, &e.key.PublicKey, e.resolved.Trust)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Times) != 2 || len(v.RekorIndexes) != 1 {
		t.Errorf("verified %+v", v)
	}
	// Stored tokens pass OpenSSL's verifier, over the stored digest.
	d, _ := hex.DecodeString(rec.Digest)
	for i, tok := range rec.Timestamps {
		if out, err := testtsa.OpenSSLVerify(t, tok.Token, d, tok.Chain[:len(tok.Chain)-1], e.tsas[i].PKI.Root); err != nil {
			t.Errorf("timestamp %d: %v\n%s", i, err, out)
		}
	}

	// A second anchor is linked to the first by a consistency proof.
	e.appendN(5)
	st2, err := r.AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := st2.Record.Previous; p == nil || p.Size != size0 || len(p.Proof) == 0 {
		t.Fatalf("second record's previous = %+v", p)
	}
	rep, err := e.audit()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 2 || rep.Verified != 2 || rep.Timestamps != 4 || rep.Tlogs != 2 || rep.Entries != 2 ||
		rep.LastSize != st2.Record.Size || len(rep.Unlogged) != 0 || rep.SelfTrusted {
		t.Errorf("report %+v", rep)
	}
	// Without configured trust, the records' own roots and keys are used,
	// and the report says so.
	rep, err = anchor.AuditAll(ctx, e.records.Dir(), anchor.AuditOptions{Verifier: e.verifier})
	if err != nil || !rep.SelfTrusted || rep.Verified != 2 {
		t.Errorf("self-trusted audit: %+v, %v", rep, err)
	}
}

// TestFaultsRefused: every way an authority can fail leaves nothing
// stored, nothing appended, and the error in the status, and appends go on
// while the runner waits.
func TestFaultsRefused(t *testing.T) {
	type tc struct {
		name  string
		tsa   testtsa.Fault
		rekor fakerekor.Fault
		want  string
	}
	cases := []tc{
		{"tsa down", testtsa.Down, 0, "503"},
		{"tsa slow", testtsa.Slow, 0, "deadline exceeded"},
		{"tsa garbage", testtsa.Garbage, 0, "TSA response"},
		{"tsa rejects", testtsa.Rejection, 0, "rejected"},
		{"tsa wrong digest", testtsa.WrongDigest, 0, "imprint"},
		{"tsa wrong nonce", testtsa.WrongNonce, 0, "nonce"},
		{"tsa untrusted chain", testtsa.Untrusted, 0, "does not chain to a trusted root"},
		{"tsa time far off", testtsa.Skewed, 0, "from this machine's clock"},
		{"rekor down", 0, fakerekor.Down, "503"},
		{"rekor slow", 0, fakerekor.Slow, "deadline exceeded"},
		{"rekor garbage", 0, fakerekor.Garbage, "creating Rekor entry"},
		{"rekor other digest", 0, fakerekor.OtherDigest, "not our digest"},
		{"rekor bad SET", 0, fakerekor.BadSET, "signed entry timestamp"},
		{"rekor bad proof", 0, fakerekor.BadProof, "inclusion proof"},
		{"rekor unpinned key", 0, fakerekor.OtherLogKey, "checkpoint does not verify"},
		{"rekor time far off", 0, fakerekor.OldTime, "integrated time 2001-01-01T00:00:00Z is"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			isTSA := c.tsa != 0
			var e *env
			if isTSA {
				e = newEnv(t, 1, false)
				e.tsas[0].SetFault(c.tsa)
			} else {
				e = newEnv(t, 0, true)
				e.rekor.SetFault(c.rekor)
			}
			r := e.runner(nil)
			size0 := e.size()

			// Appends carry on while the runner waits on the authority.
			var wg sync.WaitGroup
			var appendTime time.Duration
			wg.Go(func() {
				t0 := time.Now()
				e.appendN(1)
				appendTime = time.Since(t0)
			})
			st, err := r.AnchorNow(context.Background())
			wg.Wait()
			if err == nil {
				t.Fatalf("anchored despite the fault: %+v", st.Record)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
			if appendTime > 200*time.Millisecond {
				t.Errorf("an append took %v while anchoring waited", appendTime)
			}
			if l := e.records_(); len(l) != 0 {
				t.Errorf("%d records stored", len(l))
			}
			if got := e.size(); got != size0+1 || len(e.anchorEntries()) != 0 {
				t.Errorf("log size %d, want %d and no anchor entry", got, size0+1)
			}
			s := r.Status()
			a := s.Authorities[0]
			if a.ConsecutiveFailures != 1 || !strings.Contains(a.LastError, c.want) || a.NextRetry.IsZero() || !a.LastSuccess.IsZero() {
				t.Errorf("authority status %+v", a)
			}
			if s.LastRecord != "" || s.Unanchored != size0+1 || s.LastError == "" {
				t.Errorf("status %+v", s)
			}
			// Once the authority answers again, the round that anchors
			// clears the error (it stayed, stale, for ever).
			if isTSA {
				e.tsas[0].SetFault(testtsa.OK)
			} else {
				e.rekor.SetFault(fakerekor.OK)
			}
			if _, err := r.AnchorNow(context.Background()); err != nil {
				t.Fatalf("anchoring once the fault passed: %v", err)
			}
			if s := r.Status(); s.LastError != "" {
				t.Errorf("last error after a round that anchored: %q", s.LastError)
			}
		})
	}
}

// TestOneTSAFails: with several authorities, one failing does not stop the
// others; Run retries it with backoff, and once it recovers its token is
// stored in a record of its own.
func TestOneTSAFails(t *testing.T) {
	e := newEnv(t, 2, true)
	e.tsas[1].SetFault(testtsa.Down)
	e.resolved.Interval = time.Hour // only retries run in this test
	r := e.runner(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	proctest.WaitFor(t, "the first anchor", func() bool { return len(e.records_()) == 1 })
	rec := e.records_()[0].Record
	if len(rec.Timestamps) != 1 || rec.Timestamps[0].URL != e.tsas[0].URL || len(rec.Tlogs) != 1 {
		t.Fatalf("record: %d timestamps, %d tlogs", len(rec.Timestamps), len(rec.Tlogs))
	}
	// The failing TSA is retried with growing delays.
	proctest.WaitFor(t, "three failures of tsa 1", func() bool { return r.Status().Authorities[1].ConsecutiveFailures >= 3 })
	s := r.Status()
	if s.Authorities[0].ConsecutiveFailures != 0 || s.Authorities[0].LastSuccess.IsZero() || s.Authorities[2].ConsecutiveFailures != 0 {
		t.Errorf("healthy authorities: %+v", s.Authorities)
	}
	if a := s.Authorities[1]; !strings.Contains(a.LastError, "503") || a.NextRetry.IsZero() {
		t.Errorf("failing authority: %+v", a)
	}
	if n := len(e.records_()); n != 1 {
		t.Errorf("%d records stored while only retries failed", n)
	}
	// Recovery: the next retry anchors the latest checkpoint with it.
	e.tsas[1].SetFault(testtsa.OK)
	proctest.WaitFor(t, "the retry to succeed", func() bool { return len(e.records_()) == 2 })
	rec2 := e.records_()[1].Record
	if len(rec2.Timestamps) != 1 || rec2.Timestamps[0].URL != e.tsas[1].URL || len(rec2.Tlogs) != 0 {
		t.Errorf("retry record: %d timestamps (%v), %d tlogs", len(rec2.Timestamps), rec2.Timestamps, len(rec2.Tlogs))
	}
	proctest.WaitFor(t, "its anchor entry", func() bool { return len(e.anchorEntries()) == 2 })
	if a := r.Status().Authorities[1]; a.ConsecutiveFailures != 0 || a.LastSuccess.IsZero() {
		t.Errorf("recovered authority: %+v", a)
	}
	cancel()
	<-done
	if _, err := e.audit(); err != nil {
		t.Fatal(err)
	}
}

// TestRunAnchorsWhenGrown: Run anchors at start, then only when entries
// other than its own anchor entries were appended.
func TestRunAnchorsWhenGrown(t *testing.T) {
	e := newEnv(t, 1, true)
	e.resolved.Interval = 50 * time.Millisecond
	r := e.runner(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	proctest.WaitFor(t, "the first anchor", func() bool { return len(e.anchorEntries()) == 1 })
	time.Sleep(300 * time.Millisecond) // six intervals with nothing new
	if n := len(e.records_()); n != 1 {
		t.Fatalf("%d records while idle, want 1", n)
	}
	if s := r.Status(); s.Unanchored != 0 || s.GapSeconds != 0 || s.Stale {
		t.Errorf("idle status: %+v", s)
	}
	e.appendN(2)
	if s := r.Status(); s.Unanchored != 2 {
		t.Errorf("status after 2 appends: %+v", s)
	}
	proctest.WaitFor(t, "the second anchor", func() bool { return len(e.anchorEntries()) == 2 })
	cancel()
	rep, err := e.audit()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verified != 2 {
		t.Errorf("report %+v", rep)
	}
}

// TestRestartAppendsMissingEntry: a record stored just before a crash,
// without its anchor entry, gets it when the runner starts again.
func TestRestartAppendsMissingEntry(t *testing.T) {
	e := newEnv(t, 1, false)
	r := e.runner(nil)
	if _, err := r.AnchorNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Simulate the crash: a second record stored, its entry not appended.
	e.appendN(1)
	broken := e.runner(func(o *online.Options) { o.Log = noAppend{e.seq} })
	if st, err := broken.AnchorNow(context.Background()); st == nil || err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("AnchorNow with failing appends: %v, %v", st, err)
	}
	if n := len(e.records_()); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
	if s := broken.Status(); !strings.Contains(s.LastError, "disk on fire") {
		t.Errorf("status after the failed append: %+v", s)
	}
	rep, err := e.audit()
	if err != nil || len(rep.Unlogged) != 1 {
		t.Fatalf("audit before restart: %+v %v", rep, err)
	}
	r2 := e.runner(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r2.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.anchorEntries()); n != 3 {
		t.Errorf("%d anchor entries, want 3", n)
	}
	if rep, err := e.audit(); err != nil || len(rep.Unlogged) != 0 || rep.Entries != 3 {
		t.Errorf("audit after restart: %+v %v", rep, err)
	}
}

// TestRestartCreditsOnlyAuthoritiesInRecord: TSA 1 is down, so the round
// anchors with TSA 0 alone. After a restart the status must still show
// TSA 1 as never having succeeded: the newest record holds no token of
// its, and status and /healthz showed a success that never happened.
func TestRestartCreditsOnlyAuthoritiesInRecord(t *testing.T) {
	e := newEnv(t, 2, false)
	e.tsas[1].SetFault(testtsa.Down)
	r := e.runner(nil)
	st, err := r.AnchorNow(context.Background())
	if err != nil && st == nil {
		t.Fatal(err)
	}
	if len(st.Record.Timestamps) != 1 {
		t.Fatalf("the record holds %d tokens, want TSA 0's alone", len(st.Record.Timestamps))
	}
	before := r.Status().Authorities[1]
	if !before.LastSuccess.IsZero() || before.ConsecutiveFailures != 1 {
		t.Fatalf("TSA 1 before the restart: %+v", before)
	}
	after := e.runner(nil).Status().Authorities
	if !after[1].LastSuccess.IsZero() {
		t.Errorf("after a restart, TSA 1 (down, in no record) is reported as last succeeding at %s, the time of a record without its token", after[1].LastSuccess)
	}
	if !after[0].LastSuccess.Equal(st.Record.Created) {
		t.Errorf("after a restart, TSA 0 last succeeded at %s, want the record's time %s", after[0].LastSuccess, st.Record.Created)
	}
}

// TestRestartFindsEntryByHash: another sidecar of a shared log logged a
// record of the same name (records were named by size alone) before this
// sidecar's entry. The runner must find its entry by the record's SHA-256
// and start, not stop at the other's entry as if its record had changed;
// with no entry of its own's hash, that entry still means a change.
func TestRestartFindsEntryByHash(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, false)
	broken := e.runner(func(o *online.Options) { o.Log = noAppend{e.seq} })
	st, err := broken.AnchorNow(ctx)
	if st == nil || err == nil {
		t.Fatalf("AnchorNow with failing appends: %v, %v", st, err)
	}
	other := *st
	other.SHA256 = strings.Repeat("ab", 32)
	for _, s := range []*anchor.Stored{&other, st} {
		b, err := anchor.MarshalEntry(s, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		if s == &other {
			if _, err := online.NewRunner(ctx, online.Options{Config: e.resolved, Log: e.seq, Tree: e.store, Records: e.records, Signer: e.key}); err == nil || !strings.Contains(err.Error(), "changed after it was logged") {
				t.Errorf("a runner whose record is named by an entry of other bytes, and by none of its own: %v", err)
			}
		}
	}
	// Its own entry found, only the other's counts as unanchored.
	if s := e.runner(nil).Status(); s.LastRecord != st.Name || s.Unanchored != 1 {
		t.Errorf("status after the restart: %+v", s)
	}
}

// noAppend is a log whose appends fail.
type noAppend struct{ *server.Sequencer }

func (noAppend) Append(context.Context, []byte) (*log.Receipt, error) {
	return nil, errors.New("disk on fire")
}

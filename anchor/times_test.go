package anchor_test

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// appendAt appends a call entry dated at and returns its index.
func (e *env) appendAt(at time.Time) uint64 {
	e.t.Helper()
	b, err := (&log.Entry{Kind: log.KindCall, Time: at, Actor: "test", Fields: map[string]any{"args": map[string]any{"time": "1999-01-01T00:00:00.000000000Z"}}}).Marshal()
	if err != nil {
		e.t.Fatal(err)
	}
	rc, err := e.seq.Append(context.Background(), b)
	if err != nil {
		e.t.Fatal(err)
	}
	return rc.Index
}

// storeDated stores, as the runner does, a record of the log's latest
// checkpoint whose one authority is a token by pki dated at, and appends
// its anchor entry: a record as stored before anchor/online refused
// authorities far from the clock.
func (e *env) storeDated(pki *testtsa.PKI, at time.Time) *anchor.Stored {
	e.t.Helper()
	_, note := e.seq.Checkpoint()
	cp, err := log.ParseCheckpointNote(note)
	if err != nil {
		e.t.Fatal(err)
	}
	digest := anchor.CheckpointDigest(note)
	akey, _ := x509.MarshalPKIXPublicKey(&e.key.PublicKey)
	rec := &anchor.Record{V: anchor.RecordVersion, Checkpoint: string(note), Origin: cp.Origin, Size: cp.Size, Root: cp.Hash,
		Digest: hex.EncodeToString(digest), AnchorKey: akey, Tlogs: []*anchor.Tlog{}, Created: time.Now().UTC(),
		Timestamps: []*rfc3161.Token{pki.Token(e.t, "https://tsa.example/old", digest, at)}}
	st, err := e.records.Put(rec)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := anchor.MarshalEntry(st, "", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.seq.Append(context.Background(), b); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// auditProblems audits e's anchors against trust and returns the
// problems' text, one a line ("" when the audit passed).
func (e *env) auditProblems(trust *anchor.Trust) (*anchor.AuditReport, string) {
	e.t.Helper()
	rep, err := anchor.AuditAll(context.Background(), e.records.Dir(), anchor.AuditOptions{
		Verifier: e.verifier, AnchorKey: &e.key.PublicKey, Trust: trust, Log: e.store, Size: e.size()})
	var pe *log.ProblemsError
	if err != nil && !errors.As(err, &pe) {
		e.t.Fatal(err)
	}
	if pe == nil {
		return rep, ""
	}
	var b strings.Builder
	for _, p := range pe.Problems {
		b.WriteString(p.String() + "\n")
	}
	return rep, b.String()
}

// TestAuditAnchorBeforeEntries: an anchor whose time is before the time
// of an entry its checkpoint covers, by more than the allowed skew, fails
// the audit, naming the record, the authority and its time, and the
// entry and its time; the record no longer counts as verified. (Such a
// record verified, and evidence then said an entry of 2026 was in the log
// by 2001.)
func TestAuditAnchorBeforeEntries(t *testing.T) {
	t.Run("token dated 2001", func(t *testing.T) {
		e := newEnv(t, 0, false)
		at := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		// A TSA whose clock said 2001, with a certificate valid then and now.
		pki := testtsa.NewPKI(t, "Old TSA", true, at.Add(-time.Hour), time.Now().Add(time.Hour))
		newestTime := time.Now().Add(time.Hour)
		newest := e.appendAt(newestTime)
		e.appendN(2) // the latest time is not the last entry's
		st := e.storeDated(pki, at)
		trust := &anchor.Trust{TSARoots: []*x509.Certificate{pki.Root}}
		// The record is sound on its own: only the times contradict.
		if _, err := anchor.Verify(context.Background(), st.Record, e.verifier, &e.key.PublicKey, trust); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		rep, probs := e.auditProblems(trust)
		for _, want := range []string{st.Name + ": timestamp 0 (https://tsa.example/old): time 2001-01-01T00:00:00Z is ",
			"before the time of entry " + itoa(newest) + ", " + newestTime.UTC().Format(log.TimeFormat)} {
			if !strings.Contains(probs, want) {
				t.Errorf("problems lack %q:\n%s", want, probs)
			}
		}
		if rep.Verified != 0 {
			t.Errorf("%d records verified", rep.Verified)
		}
	})
	t.Run("within the skew", func(t *testing.T) {
		e := newEnv(t, 0, false)
		now := time.Now()
		pki := testtsa.NewPKI(t, "TSA", true, now.Add(-time.Hour), now.Add(time.Hour))
		e.appendAt(now.Add(anchor.MaxClockSkew - time.Minute))
		e.storeDated(pki, now)
		if rep, probs := e.auditProblems(&anchor.Trust{TSARoots: []*x509.Certificate{pki.Root}}); probs != "" || rep.Verified != 1 {
			t.Errorf("%d verified, problems:\n%s", rep.Verified, probs)
		}
	})
	t.Run("entries dated after both authorities", func(t *testing.T) {
		// A sidecar whose clock ran two years ahead wrote an entry, then
		// others at the right time; the TSA and Rekor vouch for now.
		e := newEnv(t, 1, true)
		late := time.Now().AddDate(2, 0, 0)
		ahead := e.appendAt(late)
		e.appendN(3)
		st, err := e.runner(nil).AnchorNow(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, probs := e.auditProblems(e.resolved.Trust)
		entry := "before the time of entry " + itoa(ahead) + ", " + late.UTC().Format(log.TimeFormat)
		for _, want := range []string{st.Name + ": timestamp 0 (" + e.tsas[0].URL + "): time ", st.Name + ": rekor.v1 0 (" + e.rekor.URL + "): time ", entry} {
			if !strings.Contains(probs, want) {
				t.Errorf("problems lack %q:\n%s", want, probs)
			}
		}
		if n := strings.Count(probs, entry); n != 2 {
			t.Errorf("%d problems name entry %d, want 2 (the token, the Rekor entry):\n%s", n, ahead, probs)
		}
	})
}

// TestAuditAnchorBeforeEntriesOpenSSL: a token from `openssl ts -reply`
// that openssl itself verifies fails the audit when an entry it covers is
// dated a year after it.
func TestAuditAnchorBeforeEntriesOpenSSL(t *testing.T) {
	ossl := testtsa.NewOpenSSL(t)
	e := newEnv(t, 0, false)
	e.cfg.TSA = []online.TSAConfig{{URL: ossl.URL, Roots: []string{certPEM(ossl.Roots[0])}}}
	e.cfg.Timeout = 20 * time.Second
	var err error
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	late := time.Now().AddDate(1, 0, 0)
	ahead := e.appendAt(late)
	st, err := e.runner(nil).AnchorNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok := st.Record.Timestamps[0]
	d, _ := hex.DecodeString(st.Record.Digest)
	if out, err := testtsa.OpenSSLVerify(t, tok.Token, d, tok.Chain[:len(tok.Chain)-1], ossl.Roots[0]); err != nil {
		t.Fatalf("openssl ts -verify: %v\n%s", err, out)
	}
	_, probs := e.auditProblems(e.resolved.Trust)
	want := st.Name + ": timestamp 0 (" + ossl.URL + "): time " + tok.Time.UTC().Format(time.RFC3339) + " is "
	if !strings.Contains(probs, want) || !strings.Contains(probs, "before the time of entry "+itoa(ahead)+", "+late.UTC().Format(log.TimeFormat)) {
		t.Errorf("problems lack %q and entry %d:\n%s", want, ahead, probs)
	}
}

func itoa(i uint64) string { return strconv.FormatUint(i, 10) }

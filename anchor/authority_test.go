package anchor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/rfc3161"
)

// anchoredRecord anchors e's log once and returns the record.
func anchoredRecord(t *testing.T, e *env) *anchor.Record {
	t.Helper()
	st, err := e.runner(nil).AnchorNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Record == nil || len(st.Record.Timestamps) != len(e.tsas) {
		t.Fatalf("record %s: %v", st.Name, st.Err)
	}
	return st.Record
}

// verifyTimestamps verifies r with tokens toks against the configured
// trust and returns the error.
func verifyTimestamps(e *env, r *anchor.Record, toks ...*rfc3161.Token) error {
	c := *r
	c.Timestamps = toks
	_, err := anchor.Verify(context.Background(), &c, e.verifier, &e.key.PublicKey, e.resolved.Trust)
	return err
}

// TestTSATokenPinnedToItsAuthority: each configured TSA's roots vouch for
// that TSA's tokens only. A record whose token was signed by TSA 1 but
// names TSA 0 claims a time from an authority that never gave it; with
// the roots of both TSAs pooled, TSA 1's root let it pass as TSA 0's.
func TestTSATokenPinnedToItsAuthority(t *testing.T) {
	e := newEnv(t, 2, false)
	r := anchoredRecord(t, e)
	if err := verifyTimestamps(e, r, r.Timestamps...); err != nil {
		t.Fatalf("the record as made: %v", err)
	}
	relabelled := *r.Timestamps[1]
	relabelled.URL = r.Timestamps[0].URL
	err := verifyTimestamps(e, r, &relabelled)
	if err == nil || !strings.Contains(err.Error(), "timestamp 0") {
		t.Errorf("TSA 1's token under TSA 0's URL: error %v, want a problem with timestamp 0", err)
	}
}

// TestTSATokenAccuracyBounded: an anchor's time is used to within
// anchor.MaxClockSkew (the covered entries' times are compared with it);
// a token whose own accuracy is wider says nothing to that precision and
// is refused offline as it is online (rfc3161's TestTimestampRefused).
func TestTSATokenAccuracyBounded(t *testing.T) {
	e := newEnv(t, 1, false)
	r := anchoredRecord(t, e)
	pki := *e.tsas[0].PKI
	pki.Accuracy = anchor.MaxClockSkew + time.Second
	tok := pki.Token(t, r.Timestamps[0].URL, anchor.CheckpointDigest([]byte(r.Checkpoint)), time.Now())
	err := verifyTimestamps(e, r, tok)
	if err == nil || !strings.Contains(err.Error(), "accuracy") {
		t.Errorf("a token of accuracy %v: error %v, want one naming its accuracy", pki.Accuracy, err)
	}
	pki.Accuracy = anchor.MaxClockSkew
	tok = pki.Token(t, r.Timestamps[0].URL, anchor.CheckpointDigest([]byte(r.Checkpoint)), time.Now())
	if err := verifyTimestamps(e, r, tok); err != nil {
		t.Errorf("a token of accuracy %v: %v", pki.Accuracy, err)
	}
}

// TestTSAPolicyPinned: a TSA configured with a policy OID vouches only
// with tokens issued under it, when anchoring and when verifying.
func TestTSAPolicyPinned(t *testing.T) {
	e := newEnv(t, 1, false)
	r := anchoredRecord(t, e) // the test TSA issues under 1.2.3.4.1
	e.cfg.TSA[0].Policy = "1.2.3.4.2"
	var err error
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	if err := verifyTimestamps(e, r, r.Timestamps...); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Errorf("a token under policy %s, the TSA pinned to 1.2.3.4.2: error %v, want one naming the policy", r.Timestamps[0].Policy, err)
	}
	if _, err := e.runner(nil).AnchorNow(context.Background()); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Errorf("anchoring with a TSA that issues under another policy: error %v, want one naming the policy", err)
	}
	e.cfg.TSA[0].Policy = "1.2.3.4.1"
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	if err := verifyTimestamps(e, r, r.Timestamps...); err != nil {
		t.Errorf("pinned to the token's policy: %v", err)
	}
	e.cfg.TSA[0].Policy = "1.2.x"
	if _, err := e.cfg.Resolve(nil); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Errorf("policy 1.2.x: Resolve error %v, want one naming the policy", err)
	}
}

package anchor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/realsvc"
	"github.com/provlog/provlog/anchor/online"
)

// rekorLink returns the "consistency" member of a stored record's first
// Rekor entry, raw, or nil if it has none.
func rekorLink(t *testing.T, record []byte) json.RawMessage {
	t.Helper()
	var r struct {
		Tlogs []struct {
			RekorV1 map[string]json.RawMessage `json:"rekor_v1"`
		} `json:"tlogs"`
	}
	if err := json.Unmarshal(record, &r); err != nil || len(r.Tlogs) == 0 {
		t.Fatalf("record: %v, %d tlogs", err, len(r.Tlogs))
	}
	return r.Tlogs[0].RekorV1["consistency"]
}

// TestRekorConsistencyReal anchors three times against the real
// rekor-server v1.5.4 (on Trillian), entries appended between: each
// record after the first must keep Rekor's consistency proof from the
// Rekor checkpoint of the record before to its own, and the audit must
// verify it offline; one flipped byte of it fails the record. On the
// base no record kept one: two Rekor checkpoints of different sizes were
// never checked against each other.
func TestRekorConsistencyReal(t *testing.T) {
	rekorURL, rekorKey := realsvc.Rekor(t)
	e := newEnv(t, 0, false)
	e.cfg.Timeout = 20 * time.Second
	e.cfg.Rekor = &online.RekorConfig{URL: rekorURL, PublicKey: pubPEM(t, rekorKey)}
	var err error
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	r := e.runner(nil)
	ctx := context.Background()
	var last *anchor.Stored
	for i := range 3 {
		st, err := r.AnchorNow(ctx)
		if err != nil {
			t.Fatalf("anchor %d: %v (status %+v)", i, err, r.Status())
		}
		link := rekorLink(t, st.Bytes)
		switch {
		case i == 0 && link != nil:
			t.Errorf("record %d, the first: its Rekor entry keeps a consistency proof %s from nothing", i, link)
		case i > 0 && link == nil:
			t.Errorf("record %d (%s): its Rekor entry (log index %d) keeps no consistency proof from the Rekor checkpoint of the record before (log index %d)",
				i, st.Name, st.Record.Tlogs[0].RekorV1.LogIndex, last.Record.Tlogs[0].RekorV1.LogIndex)
		}
		last = st
		e.appendN(2)
	}
	if rep, err := e.audit(); err != nil || rep.Verified != 3 {
		t.Fatalf("audit: %+v, %v", rep, err)
	}
	link := rekorLink(t, last.Bytes)
	if link == nil {
		return
	}
	// One byte of the kept proof flipped: the record alone fails.
	var m map[string]any
	json.Unmarshal(last.Bytes, &m)
	c := m["tlogs"].([]any)[0].(map[string]any)["rekor_v1"].(map[string]any)["consistency"].(map[string]any)
	proof := c["proof"].([]any)
	if len(proof) == 0 {
		t.Fatalf("the proof from size 2 to 3 is empty: %s", link)
	}
	h := []byte(proof[0].(string))
	h[0] ^= 'A' ^ 'B'
	if h[0] != 'A' && h[0] != 'B' {
		h[0] = 'A'
	}
	proof[0] = string(h)
	b, _ := json.Marshal(m)
	rec, err := anchor.ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Verify(ctx, rec, e.verifier, &e.key.PublicKey, e.resolved.Trust); err == nil || !strings.Contains(err.Error(), "rekor.v1 0") {
		t.Errorf("a flipped byte in the kept Rekor consistency proof: Verify %v, want the Rekor entry to fail", err)
	}
}

// TestRekorForkBetweenUploads: Rekor (the small fake, faithful to
// rekor-server's API) shows the checkpoint of size 2 to the second
// upload, then forks: the third upload's checkpoint is of size 3, but its
// tree does not extend the one of size 2. The upload must fetch Rekor's
// consistency proof from size 2, find it fails, refuse the entry as a
// Rekor fork and store nothing. On the base the entry was stored and the
// audit passed: it compared only checkpoints of one size.
func TestRekorForkBetweenUploads(t *testing.T) {
	e := newEnv(t, 0, true)
	r := e.runner(nil)
	ctx := context.Background()
	for i := range 2 {
		if _, err := r.AnchorNow(ctx); err != nil {
			t.Fatalf("anchor %d: %v", i, err)
		}
		e.appendN(1)
	}
	e.rekor.SetFault(fakerekor.Fork)
	st, err := r.AnchorNow(ctx)
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") {
		name := ""
		if st != nil {
			name = st.Name
		}
		_, aerr := e.audit()
		t.Errorf("Rekor's checkpoint of size 3 does not extend its checkpoint of size 2: AnchorNow stored %q, error %v (audit: %v); want the entry refused as a Rekor fork", name, err, aerr)
	}
	if n := len(e.records_()); n != 2 {
		t.Errorf("%d records stored, want the 2 made before the fork", n)
	}
	if st := r.Status().Authorities[0]; !strings.Contains(st.LastError, "Rekor fork") {
		t.Errorf("Rekor's status after the fork: %+v, want its last error to say Rekor fork", st)
	}
}

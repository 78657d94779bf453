package pull

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestProbePulledRecordNonCanonical: the pull check records what it
// verified with note.Open, as witness.Verified writes it: each
// signature's base64 as the log spelled it. A log that serves its
// checkpoint with the signature's spare base64 bits set is recorded so;
// when it later forks, the evidence's first checkpoint is that record and
// witness.Evidence.Verify refuses it ("not written in canonical base64").
//
// Observed: same-size fork: ErrFork with evidence that fails Verify on
// checkpoint 1.
//
// Cause: witness/note.go Verified keeps s.Base64 verbatim (and
// witness/pull openCheckpoint uses note.Open). Fix: re-encode the
// verified signatures canonically in Verified, or refuse non-canonical
// spellings as log.OpenCheckpoint does.
func TestProbePulledRecordNonCanonical(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	k := witnesstest.NewKey(t, origin)
	honest := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")
	cp := bytes.Clone(honest.Grow(t, 12))
	i := bytes.LastIndex(cp, []byte("=\n")) - 1
	cp[i] = alphabet[strings.IndexByte(alphabet, cp[i])^1]
	store := witnesstest.NewStore()
	srv := splice(cp, honest)
	if _, err := check(t, store, srv.URL+"/log/", k); err != nil {
		t.Fatalf("the honest checkpoint, spare bits set: %v", err)
	}
	srv.Close()
	srv = splice(evil.Grow(t, 12), evil)
	defer srv.Close()
	res, err := check(t, store, srv.URL+"/log/", k)
	if !errors.Is(err, ErrFork) || res == nil || res.Evidence == nil {
		t.Fatalf("fork: %+v, %v", res, err)
	}
	ev, _ := witness.ParseEvidence(res.Evidence.Marshal())
	if err := ev.Verify(k.Verifier); err != nil {
		t.Errorf("fork evidence does not verify with the log's key: %v", err)
	}
}

package pull

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestPulledRecordNonCanonical: a log serves its checkpoint with the
// signature's spare base64 bits set (note.Open decodes leniently and
// accepts it). The pull check records the note re-encoded canonically
// (witness.Verified), so when the log later forks, the evidence built on
// that record verifies with the log's key.
func TestPulledRecordNonCanonical(t *testing.T) {
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

package pull

import (
	"bytes"
	"errors"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// doubleSig returns the signed note cp with its (only) signature line
// written twice. golang.org/x/mod/sumdb/note.Open drops a repeated
// identical line and accepts the note; log.OpenCheckpoint (log.OpenNote)
// refuses it ("written twice"), and so does witness.Evidence.Verify.
func doubleSig(cp []byte) []byte {
	i := bytes.LastIndex(cp, []byte("\n\n"))
	return append(bytes.Clone(cp), cp[i+2:]...)
}

// TestForkWithDoubledSignatureLine: a forking log (the evil twin, same
// key) serves its checkpoint with its own signature line written twice.
// note.Open passes over the repeated line; the evidence holds the note as
// verified, so Check reports the fork (ErrFork, for a larger tree and for
// the same size) with evidence that verifies with the log's key alone.
func TestForkWithDoubledSignatureLine(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	honest := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")
	for _, tc := range []struct {
		name           string
		recorded, evil uint64
	}{
		{"larger tree, other history", 10, 20},
		{"same size, other root", 12, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := witnesstest.NewStore()
			honest.Grow(t, tc.recorded)
			srv := splice(honest.Checkpoint(t, tc.recorded), honest)
			if _, err := check(t, store, srv.URL+"/log/", k); err != nil {
				t.Fatal(err)
			}
			srv.Close()

			evil.Grow(t, tc.evil)
			srv = splice(doubleSig(evil.Checkpoint(t, tc.evil)), evil)
			defer srv.Close()
			res, err := check(t, store, srv.URL+"/log/", k)
			if !errors.Is(err, ErrFork) {
				t.Fatalf("a fork served with a doubled signature line: error %v, want ErrFork", err)
			}
			if res == nil || res.Evidence == nil {
				t.Fatalf("no evidence: %+v", res)
			}
			ev, perr := witness.ParseEvidence(res.Evidence.Marshal())
			if perr != nil {
				t.Fatal(perr)
			}
			if err := ev.Verify(k.Verifier); err != nil {
				t.Errorf("fork evidence does not verify with the log's key: %v", err)
			}
		})
	}
}

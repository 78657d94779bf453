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
// identical line and accepts the note; log.OpenCheckpoint (openNote)
// refuses it ("written twice"), and so does witness.Evidence.Verify.
func doubleSig(cp []byte) []byte {
	i := bytes.LastIndex(cp, []byte("\n\n"))
	return append(bytes.Clone(cp), cp[i+2:]...)
}

// TestProbeForkWithDoubledSignatureLine: a forking log (the evil twin,
// same key) serves its checkpoint with its own signature line written
// twice. The pull check opens it with note.Open, which drops the repeated
// line, and so takes it as validly signed; but the evidence it builds
// carries the served bytes verbatim, and witness.Evidence.Verify, which
// reads them with log.OpenCheckpoint, refuses a line written twice.
//
// Observed: for a larger tree with another history, Check returns a plain
// error ("the consistency proof from size 10 to 20 fails, yet shows no
// fork: evidence: checkpoint 2: checkpoint: the signature by
// log.example/pulled is written twice"), not ErrFork, and no evidence: the
// fork goes unreported (`provlog-witness check` says neither FORK nor
// writes a file). For the same size, ErrFork comes with evidence that does
// not verify with the log's key, although the command tells the operator
// to "check it with the log's key alone".
//
// Cause: witness/pull/pull.go keeps `body` (the served bytes) for the
// evidence, while `kept` (witness.Verified(n)) is what it verified. Fix:
// build the evidence from kept (the note with only the log's verified
// signatures, canonically written), as the record already is; the witness
// server's fork (server.go, w.fork with req.Checkpoint) needs the same.
func TestProbeForkWithDoubledSignatureLine(t *testing.T) {
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

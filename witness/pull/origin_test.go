package pull

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestForkOriginNotKeyName: `provlog-witness check --origin O` follows a
// log whose origin is not its key's name (c2sp.org/signed-note does not
// tie them). A fork of such a log, to a larger tree or at the same size,
// is reported as ErrFork with evidence that verifies with the log's key:
// witness.Evidence.Verify checks the checkpoints' origin against the
// evidence's, not the key's name.
func TestForkOriginNotKeyName(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	honest := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")
	skey, vkey, err := note.GenerateKey(rand.Reader, "keys.example/x")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	resign := func(cp []byte) []byte {
		n, err := note.Open(cp, note.VerifierList(k.Verifier))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := note.Sign(&note.Note{Text: n.Text}, s)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	for _, tc := range []struct {
		name           string
		recorded, evil uint64
	}{
		{"larger tree, other history", 10, 20},
		{"same size, other root", 12, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := witnesstest.NewStore()
			opts := func(url string) Options {
				return Options{URL: url, Verifier: v, Origin: origin, Store: store}
			}
			honest.Grow(t, tc.recorded)
			srv := splice(resign(honest.Checkpoint(t, tc.recorded)), honest)
			if _, err := Check(context.Background(), opts(srv.URL+"/log/")); err != nil {
				t.Fatal(err)
			}
			srv.Close()
			evil.Grow(t, tc.evil)
			srv = splice(resign(evil.Checkpoint(t, tc.evil)), evil)
			defer srv.Close()
			res, err := Check(context.Background(), opts(srv.URL+"/log/"))
			if !errors.Is(err, ErrFork) {
				t.Fatalf("fork of a log whose origin is not its key's name: error %v, want ErrFork", err)
			}
			ev, perr := witness.ParseEvidence(res.Evidence.Marshal())
			if perr != nil {
				t.Fatal(perr)
			}
			if err := ev.Verify(v); err != nil {
				t.Errorf("fork evidence does not verify with the log's key: %v", err)
			}
		})
	}
}

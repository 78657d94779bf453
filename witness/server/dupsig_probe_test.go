package server

import (
	"bytes"
	"testing"

	"github.com/provlog/provlog/witness/witnesstest"
)

// TestProbeForkEvidenceDoubledSignatureLine: a forking log (same key as
// f.a) sends its checkpoints with its signature line written twice. The
// witness opens them with note.Open, which drops a repeated identical
// line, finds the fork, refuses, and hands OnFork evidence holding
// req.Checkpoint verbatim; witness.Evidence.Verify reads it with
// log.OpenCheckpoint, which refuses a line written twice. The evidence
// provlog-witness writes to <data>/evidence ("check it with the log's key
// alone") does not verify.
//
// Observed: both the larger-tree fork (old 10 -> 20, 422) and the
// same-size fork (409) give evidence whose Verify fails with "evidence:
// checkpoint 2: checkpoint: the signature by log.example/a is written
// twice".
//
// Cause: witness/server/server.go, fork(): ForkFromProof(recorded,
// req.Checkpoint, ...). Fix: pass the note as verified (witness.Verified(n),
// already computed as `kept` in AddCheckpoint) instead of the bytes sent.
func TestProbeForkEvidenceDoubledSignatureLine(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	evil := witnesstest.NewLog(t, f.a.Key, "evil")
	if status, _, body := f.post(t, request(t, f.a, 0, 10)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	double := func(cp []byte) []byte {
		i := bytes.LastIndex(cp, []byte("\n\n"))
		return append(bytes.Clone(cp), cp[i+2:]...)
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"larger tree", withCheckpoint(request(t, evil, 10, 20), double(evil.Checkpoint(t, 20))), 422},
		{"same size", "old 10\n\n" + string(double(evil.Checkpoint(t, 10))), 409},
	} {
		if status, _, body := f.post(t, tc.body); status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
		select {
		case ev := <-f.forks:
			if err := ev.Verify(f.a.Key.Verifier); err != nil {
				t.Errorf("%s: the fork evidence does not verify with the log's key: %v", tc.name, err)
			}
		default:
			t.Errorf("%s: no fork evidence", tc.name)
		}
	}
}

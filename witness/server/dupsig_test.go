package server

import (
	"bytes"
	"testing"

	"github.com/provlog/provlog/witness/witnesstest"
)

// TestForkEvidenceDoubledSignatureLine: a forking log (same key as f.a)
// sends its checkpoints with its signature line written twice. The
// witness refuses them as forks, and the evidence it hands OnFork holds
// the checkpoint as verified, not the bytes sent, so it verifies with the
// log's key alone.
func TestForkEvidenceDoubledSignatureLine(t *testing.T) {
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

package server

import (
	"bytes"
	"testing"

	"github.com/provlog/provlog/witness/witnesstest"
)

// TestStrictSignatureLines: the witness reads a checkpoint's signature
// lines as a strict c2sp.org/signed-note reader does (log.OpenNote), not
// as note.Open, which passes over a line by a key it has already seen: a
// line written twice is refused, and so is a second line by the log's
// key, which note.Open never verified and here does not verify (403, a
// signature problem, for both). Nothing is recorded or cosigned: the honest checkpoint from old
// size 0 is taken afterwards. (A fork sent so is still refused with its
// evidence: TestForkEvidenceDoubledSignatureLine.)
func TestStrictSignatureLines(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	body := request(t, f.a, 0, 10)
	cp := f.a.Checkpoint(t, 10)
	lastLine := func(msg []byte) []byte { return msg[bytes.LastIndex(msg, []byte("\n\n"))+2:] }
	for _, tc := range []struct {
		name   string
		cp     []byte
		status int
	}{
		{"the log's line written twice", append(bytes.Clone(cp), lastLine(cp)...), 403},
		{"a second line by the log's key that does not verify", append(bytes.Clone(cp), lastLine(corruptSignature(t, cp))...), 403},
	} {
		if status, _, resp := f.post(t, withCheckpoint(body, tc.cp)); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, resp, tc.status)
		}
	}
	if status, _, resp := f.post(t, body); status != 200 {
		t.Fatalf("the checkpoint as signed, afterwards: %d %s (was a refused one recorded?)", status, resp)
	}
}

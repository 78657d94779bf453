package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness/witnesstest"
)

// spareBits rewrites the last signature line of cp with the spare bits of
// its last base64 character set: the same signature bytes to
// encoding/base64's lenient decoder (which note.Open uses), but not the
// canonical spelling log.OpenCheckpoint (log.OpenNote) insists on.
func spareBits(t *testing.T, cp []byte) []byte {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := bytes.Clone(cp)
	i := bytes.LastIndex(b, []byte("=\n")) - 1 // the last data character before the padding
	if i < 0 {
		t.Fatal("no padded signature")
	}
	v := strings.IndexByte(alphabet, b[i])
	b[i] = alphabet[v|3] // ed25519 note signatures are 68 bytes: one '=', 2 spare bits
	if bytes.Equal(b, cp) {
		b[i] = alphabet[v&^3|1]
	}
	return b
}

// TestForkEvidencePoisonedRecord: a log that means to fork first sends
// the witness a valid checkpoint whose signature is spelled with its
// base64 spare bits set. The witness records it re-encoded canonically
// (witness.Verified), so the fork evidence built on that record when the
// log then forks verifies with the log's key: the log cannot make every
// piece of evidence against it unverifiable in advance.
func TestForkEvidencePoisonedRecord(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	evil := witnesstest.NewLog(t, f.a.Key, "evil")
	f.a.Grow(t, 10)
	cp := spareBits(t, f.a.Checkpoint(t, 10))
	if status, _, body := f.post(t, "old 0\n\n"+string(cp)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if status, _, body := f.post(t, "old 10\n\n"+string(evil.Grow(t, 10))); status != 409 {
		t.Fatalf("fork at the same size: %d %s", status, body)
	}
	select {
	case ev := <-f.forks:
		if err := ev.Verify(f.a.Key.Verifier); err != nil {
			t.Errorf("the fork evidence does not verify with the log's key: %v", err)
		}
	default:
		t.Error("no fork evidence")
	}
}

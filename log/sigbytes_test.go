package log_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// A signature line's base64 has spare low bits in its last character
// before "=" (68 signature bytes: 2 spare bits). A note whose signature
// differs only there is another byte string for the same signature;
// OpenCheckpoint must refuse it, or one changed byte in a receipt, a
// bundle's checkpoint or an evidence's issued.tlog-proof still verifies
// (seen: verify-proof, verify-bundle, verify-evidence printed OK: note.Open
// decodes with the lenient base64.StdEncoding); nor one with a signature
// line written twice.
func TestOpenCheckpointRefusesNonCanonicalSignatureBase64(t *testing.T) {
	s, v := logtest.NewKey(t, "example.com/log")
	msg, err := log.SignCheckpoint(log.Checkpoint{Origin: "example.com/log", Size: 1, Hash: log.LeafHash([]byte("x"))}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := log.OpenCheckpoint(msg, v); err != nil {
		t.Fatalf("the signed note does not open: %v", err)
	}
	i := bytes.LastIndex(msg, []byte("=\n"))
	if i < 1 || bytes.HasSuffix(msg, []byte("==\n")) {
		t.Fatalf("the signature line does not end in one '=': %q", msg)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	k := bytes.IndexByte([]byte(alphabet), msg[i-1])
	altered := bytes.Clone(msg)
	altered[i-1] = alphabet[k^1] // a spare bit: the decoded bytes are the same
	sig := func(b []byte) []byte {
		line := b[bytes.LastIndexByte(b[:len(b)-1], ' ')+1 : len(b)-1]
		d, err := base64.StdEncoding.DecodeString(string(line))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if !bytes.Equal(sig(msg), sig(altered)) {
		t.Fatal("the altered character changed the decoded signature; the test is wrong")
	}
	if _, _, err := log.OpenCheckpoint(altered, v); err == nil {
		t.Errorf("OpenCheckpoint accepted a note with a changed byte in its signature line:\n%s", altered)
	}
	// The same signature line twice: another byte string for one note.
	line := msg[bytes.LastIndex(msg[:len(msg)-1], []byte("\n"))+1:]
	if _, _, err := log.OpenCheckpoint(append(bytes.Clone(msg), line...), v); err == nil {
		t.Errorf("OpenCheckpoint accepted a note with its signature line written twice")
	}
}

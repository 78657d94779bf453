package log_test

import (
	"encoding/base64"
	"slices"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// TestSecondSignatureLineByKnownKey: a checkpoint note altered by
// appending a second signature line by a key the verifier knows (the
// log's, or a witness's), with the same name and key ID and a signature
// that does not verify, in canonical base64. note.Open verifies the first
// line by a key and drops later ones unchecked; OpenCheckpoint and
// OpenWitnessedCheckpoint refuse the note (a witness's line is unknown to
// OpenCheckpoint, and rightly ignored there).
func TestSecondSignatureLineByKnownKey(t *testing.T) {
	logS, logV := logtest.NewKey(t, "log.example/second")
	ws, wvs := cosigners(t, 1)
	_, _, msg := cosignTree(t, 5, logS, ws[0])
	p := log.WitnessPolicy{Witnesses: wvs, Threshold: 1}
	if _, _, err := log.OpenWitnessedCheckpoint(msg, logV, p); err != nil {
		t.Fatal(err)
	}
	n := mustOpen(t, msg, logV, wvs[0])
	for _, s := range n.Sigs {
		raw, _ := base64.StdEncoding.DecodeString(s.Base64)
		raw[len(raw)-1] ^= 0xff // the signature, not the key ID
		altered := append(slices.Clone(msg), []byte("— "+s.Name+" "+base64.StdEncoding.EncodeToString(raw)+"\n")...)
		if _, _, err := log.OpenCheckpoint(altered, logV); err == nil && s.Name == logV.Name() {
			t.Errorf("OpenCheckpoint accepted the checkpoint with a forged second line by %s", s.Name)
		}
		if _, _, err := log.OpenWitnessedCheckpoint(altered, logV, p); err == nil {
			t.Errorf("OpenWitnessedCheckpoint accepted the checkpoint with a forged second line by %s", s.Name)
		}
	}
}

package pull

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness/witnesstest"
)

// TestCheckStrictSignatureLines: a log serving its new checkpoint with its
// signature line written twice, or with a second line by its key that
// does not verify, serves a note a strict c2sp.org/signed-note reader
// (log.OpenNote) refuses; note.Open passes over the second line. Check
// reports an error and records nothing. (A fork served so is still a fork
// with evidence: TestForkWithDoubledSignatureLine.)
func TestCheckStrictSignatureLines(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	lastLine := func(msg []byte) []byte { return msg[bytes.LastIndex(msg, []byte("\n\n"))+2:] }
	for name, variant := range map[string]func(cp []byte) []byte{
		"line written twice": doubleSig,
		"second line by the log's key that does not verify": func(cp []byte) []byte {
			line := string(lastLine(cp))
			i := strings.LastIndex(line, " ")
			sig, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(line[i+1:], "\n"))
			if err != nil {
				t.Fatal(err)
			}
			sig[len(sig)-1] ^= 1
			return append(bytes.Clone(cp), line[:i+1]+base64.StdEncoding.EncodeToString(sig)+"\n"...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := witnesstest.NewStore()
			l := witnesstest.NewLog(t, k, "x")
			l.Grow(t, 10)
			if _, err := check(t, store, l.Prefix(), k); err != nil {
				t.Fatal(err)
			}
			l.Grow(t, 20)
			srv := splice(variant(l.Checkpoint(t, 20)), l)
			defer srv.Close()
			res, err := check(t, store, srv.URL+"/log/", k)
			if err == nil {
				t.Errorf("accepted: %+v", res)
			}
			if got := recordedSize(t, store); got != 10 {
				t.Errorf("recorded size %d, want 10", got)
			}
		})
	}
}

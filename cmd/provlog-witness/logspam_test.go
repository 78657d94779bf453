package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestWrongProofLogBounded: anyone can replay a log's public checkpoint
// with a wrong consistency proof and 60 KiB of other signature lines. The
// witness refuses it (422) and logs it, as the spec allows; it logged the
// request as sent, so each such request from a client without a key
// wrote over 60 KiB to its log. What it logs must be what the log signed
// and the proof, not the padding.
func TestWrongProofLogBounded(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/spam")
	l := witnesstest.NewLog(t, k, "honest")
	l.Grow(t, 10)
	cfgPath, _ := witnessSetup(t, k)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	url := "http://" + addr
	_, stderr := startWitness(t, bin, cfgPath, addr)
	if st, b := addCheckpoint(t, url, l, 0, 3); st != http.StatusOK {
		t.Fatalf("%d %q", st, b)
	}
	h := sha256.Sum256([]byte("wrong"))
	proof := make([][]byte, 4)
	for i := range proof {
		proof[i] = h[:]
	}
	const n = 20
	before := len(stderr.String())
	for range n {
		req := &witness.AddCheckpointRequest{OldSize: 3, Proof: proof, Checkpoint: padded(l.Checkpoint(t, 10), 60<<10)}
		resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(req.String()))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("wrong proof: %d %q", resp.StatusCode, b)
		}
	}
	// The log reaches stderr after the response, through a pipe.
	for strings.Count(stderr.String()[before:], "refused a validly signed checkpoint") < n {
		time.Sleep(10 * time.Millisecond)
	}
	out := stderr.String()[before:]
	per := len(out) / n
	t.Logf("%d bytes logged per request", per)
	if per > 4<<10 {
		t.Errorf("each replayed checkpoint with a wrong proof and 60 KiB of padding wrote %d bytes to the witness's log", per)
	}
	if bytes.Contains([]byte(out), []byte("junk.example")) {
		t.Errorf("the log holds the request's unverified signature lines")
	}
	if st, b := addCheckpoint(t, url, l, 3, 10); st != http.StatusOK {
		t.Fatalf("3->10: %d %q", st, b)
	}
}

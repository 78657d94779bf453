package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestSidecarRestartCosignsOnce: a sidecar with one witness is stopped
// and started again with no call in between. On start it submits its
// latest checkpoint, the one cosigned.checkpoint already holds; the
// witness cosigns it again (new timestamp). cosigned.checkpoint keeps one
// line by the witness, however often the sidecar restarts
// (witness/client TestRestartCosignsOnce).
func TestSidecarRestartCosignsOnce(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.example/restart")
	s := witnesstest.NewCosigner(t, "witness.example/w1")
	w := logWitness(t, s, k.verifier)
	var requests atomic.Int64
	srv := httptest.NewServer(countRequests(&requests, w))
	defer srv.Close()
	cfg := func() *Config {
		return &Config{Data: data, Actor: "local",
			Witnesses:     []WitnessConfig{{URL: srv.URL, VKey: s.Verifier().String()}},
			WitnessPolicy: WitnessPolicyConfig{Threshold: 1, Interval: 20 * time.Millisecond}}
	}
	path := filepath.Join(data, cosignedFile)
	cosignedBy := func() int {
		b, _ := os.ReadFile(path)
		return strings.Count(string(b), "— witness.example/w1 ")
	}

	sc := mustOpenSidecar(t, cfg())
	if _, err := sc.seq.Append(context.Background(), callEntry("s", "t", map[string]any{"i": 1})); err != nil {
		t.Fatal(err)
	}
	size, _ := sc.seq.Checkpoint()
	proctest.WaitFor(t, "the latest checkpoint cosigned and saved", func() bool {
		b, _ := os.ReadFile(path)
		return cosignedBy() == 1 && strings.Contains(string(b), "\n"+itoa(size)+"\n")
	})
	sc.close()

	time.Sleep(1100 * time.Millisecond) // a cosignature's timestamp has a second's resolution
	n := requests.Load()
	sc = mustOpenSidecar(t, cfg())
	defer sc.close()
	if now, _ := sc.seq.Checkpoint(); now != size {
		t.Logf("the log grew on restart (%d -> %d): not the case probed", size, now)
		return
	}
	proctest.WaitFor(t, "the witness asked again after the restart", func() bool { return requests.Load() > n })
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && cosignedBy() < 2; time.Sleep(10 * time.Millisecond) {
	}
	if got := cosignedBy(); got != 1 {
		b, _ := os.ReadFile(path)
		t.Errorf("after a restart, %s carries %d cosignatures by witness.example/w1:\n%s", cosignedFile, got, b)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// countRequests counts the requests h serves.
func countRequests(n *atomic.Int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}

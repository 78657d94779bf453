package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestCheckpointNoRollbackAfterRestart: /log/checkpoint never serves a
// checkpoint older than one it served before a restart, and serves the
// witnesses' cosignatures again once they cosign one at least as new. The
// sidecar runs three times on one data dir: with a witness (its
// cosigned checkpoint, of size N, kept in the data dir), without one
// (/log/checkpoint serves the latest, M > N, to a client), and with the
// witness again while it refuses to cosign: the kept cosigned checkpoint
// of size N is older than what the client read.
func TestCheckpointNoRollbackAfterRestart(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.example/served")
	s := witnesstest.NewCosigner(t, "witness.example/w1")
	w := logWitness(t, s, k.verifier)
	var refusing atomic.Bool
	ws := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if refusing.Load() {
			http.Error(rw, "down for the test", http.StatusServiceUnavailable)
			return
		}
		w.ServeHTTP(rw, r)
	}))
	defer ws.Close()
	withWitness := &Config{Data: data, Actor: "local",
		Witnesses:     []WitnessConfig{{URL: ws.URL, VKey: s.Verifier().String()}},
		WitnessPolicy: WitnessPolicyConfig{Threshold: 1, Interval: 20 * time.Millisecond}}
	// checkpoint reads /log/checkpoint of sc: its size and whether the
	// witness cosigned it.
	checkpoint := func(sc *sidecar) (uint64, bool) {
		t.Helper()
		hs := httptest.NewServer(sc.handler())
		defer hs.Close()
		resp, err := http.Get(hs.URL + "/log/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c, _, err := log.OpenCheckpoint(b, k.verifier)
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("/log/checkpoint: %s (%v)\n%s", resp.Status, err, b)
		}
		return c.Size, strings.Contains(string(b), "— witness.example/w1 ")
	}
	appendSome := func(sc *sidecar, n int) {
		t.Helper()
		for i := range n {
			if _, err := sc.seq.Append(ctx, callEntry("s", "t", map[string]any{"i": i})); err != nil {
				t.Fatal(err)
			}
		}
	}

	sc := mustOpenSidecar(t, withWitness)
	appendSome(sc, 2)
	proctest.WaitFor(t, "the latest checkpoint cosigned", func() bool {
		size, cosigned := checkpoint(sc)
		latest, _ := sc.seq.Checkpoint()
		return cosigned && size == latest
	})
	cosignedSize, _ := checkpoint(sc)
	sc.close()

	sc = mustOpenSidecar(t, &Config{Data: data, Actor: "local"})
	appendSome(sc, 5)
	read, _ := checkpoint(sc) // what a client read
	sc.close()
	if read <= cosignedSize {
		t.Fatalf("the log did not grow past the cosigned size %d (read %d): not the case probed", cosignedSize, read)
	}

	refusing.Store(true)
	sc = mustOpenSidecar(t, withWitness)
	defer sc.close()
	if got, _ := checkpoint(sc); got < read {
		t.Fatalf("after a restart /log/checkpoint served size %d, older than the %d it served before (the witnesses' cosigned checkpoint is of size %d)", got, read, cosignedSize)
	}
	refusing.Store(false)
	proctest.WaitFor(t, "/log/checkpoint serving a cosigned checkpoint again", func() bool {
		size, cosigned := checkpoint(sc)
		if size < read {
			t.Fatalf("/log/checkpoint served size %d, older than the %d it served before", size, read)
		}
		return cosigned
	})
}

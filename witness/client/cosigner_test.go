package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesspebble"
	"github.com/provlog/provlog/witness/witnesstest"
)

// pebbleWitness is a real witness over HTTP keeping its state in Pebble.
func pebbleWitness(t *testing.T, signer *log.CosignatureSigner, k witnesstest.Key) *testWitness {
	t.Helper()
	kv, err := witnesspebble.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return newTestWitnessOn(t, witness.KVStore(kv), signer, k)
}

// TestCosignerSlowWitness runs a 2-of-5 policy over real witnesses on
// Pebble: two answer, one hangs, one answers garbage, one cosigns with a
// key other than the one configured. Each checkpoint is cosigned while
// the hanging witness's first request is still open (the round waited
// for it, up to Timeout, every time), and the hanging witness's
// cosignature is added to the latest checkpoint once it answers.
func TestCosignerSlowWitness(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	w1 := pebbleWitness(t, witnesstest.NewCosigner(t, "witness.example/w1"), k)
	w2 := pebbleWitness(t, witnesstest.NewCosigner(t, "witness.example/w2"), k)
	slow := pebbleWitness(t, witnesstest.NewCosigner(t, "witness.example/slow"), k)
	hold := make(chan struct{})
	slow.hold.Store(&hold)
	release := sync.OnceFunc(func() { slow.hold.Store(nil); close(hold) })
	t.Cleanup(release) // before its server closes, should the test fail
	wrongKey := pebbleWitness(t, witnesstest.NewCosigner(t, "witness.example/wrong"), k)
	garbage := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "hello\n") }))
	defer garbage.Close()
	hg, err := NewHTTP(garbage.URL, garbage.Client())
	if err != nil {
		t.Fatal(err)
	}
	garbageKey := witnesstest.NewCosigner(t, "witness.example/garbage").Verifier()
	configuredWrong := witnesstest.NewCosigner(t, "witness.example/wrong").Verifier() // not the key it signs with

	var (
		mu       sync.Mutex
		cosigned [][]byte
	)
	c, err := NewCosigner(CosignerOptions{
		Log: k.Verifier,
		Witnesses: []*Witness{w1.client(t, l), slow.client(t, l), NewWitness(hg, garbageKey, l.Store),
			NewWitness(wrongKey.client(t, l).api, configuredWrong, l.Store), w2.client(t, l)},
		Threshold:  2,
		Interval:   time.Millisecond,
		Timeout:    time.Hour, // the slow witness answers when the test lets it
		OnCosigned: func(b []byte) { mu.Lock(); cosigned = append(cosigned, b); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	size := func() uint64 {
		cp, _ := log.ParseCheckpointNote(c.Latest())
		return cp.Size
	}
	for _, n := range []uint64{10, 20, 30} {
		c.Submit(l.Grow(t, n))
		// The slow witness's first request, once open, stays open until
		// release.
		proctest.WaitFor(t, fmt.Sprintf("the checkpoint of size %d cosigned while the slow witness holds a request", n), func() bool {
			return size() == n && slow.open.Load() == 1
		})
	}
	if got := slow.requests.Load(); got != 1 {
		t.Errorf("the slow witness got %d requests while it held one, want 1", got)
	}
	all := []note.Verifier{w1.signer.Verifier(), w2.signer.Verifier(), slow.signer.Verifier(), garbageKey, configuredWrong}
	if _, _, err := log.OpenWitnessedCheckpoint(c.Latest(), k.Verifier, log.WitnessPolicy{Witnesses: all, Threshold: 2}); err != nil {
		t.Fatalf("Latest: %v", err)
	}

	// The slow witness answers (size 10, no longer the latest), is asked
	// for size 30, and its cosignature joins the latest checkpoint.
	release()
	proctest.WaitFor(t, "the slow witness's cosignature on the latest checkpoint", func() bool {
		_, _, err := log.OpenWitnessedCheckpoint(c.Latest(), k.Verifier, log.WitnessPolicy{Witnesses: all, Threshold: 3})
		return err == nil
	})
	if size() != 30 {
		t.Errorf("Latest has size %d, want 30", size())
	}
	mu.Lock()
	if len(cosigned) == 0 || string(cosigned[len(cosigned)-1]) != string(c.Latest()) {
		t.Error("OnCosigned did not get the checkpoint with the late cosignature")
	}
	mu.Unlock()
	var st Status
	proctest.WaitFor(t, "the garbage and wrong-key witnesses' answers in the status", func() bool {
		st = c.Status()
		return st.Witnesses[2].LastError != "" && st.Witnesses[3].LastError != ""
	})
	for i, want := range []string{"", "", "malformed response", "no cosignature by its key", ""} {
		if got := st.Witnesses[i].LastError; want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("witness %s: last error %q, want %q", st.Witnesses[i].Name, got, want)
		}
	}
}

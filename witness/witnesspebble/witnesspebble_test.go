package witnesspebble

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

func TestKV(t *testing.T) {
	dir := t.TempDir()
	kv, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("origin/log.example")
	if _, err := kv.Get(k); !errors.Is(err, log.ErrNotFound) {
		t.Fatalf("Get of an absent key: %v, want ErrNotFound", err)
	}
	if err := kv.CompareAndSwap(k, []byte("x"), []byte("v1")); !errors.Is(err, witness.ErrConflict) {
		t.Fatalf("swap from a value the absent key does not hold: %v, want ErrConflict", err)
	}
	if err := kv.CompareAndSwap(k, nil, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	for _, old := range [][]byte{nil, []byte("v0"), []byte("v1x"), {}} {
		if err := kv.CompareAndSwap(k, old, []byte("v2")); !errors.Is(err, witness.ErrConflict) {
			t.Errorf("CompareAndSwap(old=%q) on v1: %v, want ErrConflict", old, err)
		}
	}
	if err := kv.CompareAndSwap(k, []byte("v1"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := kv.CompareAndSwap(k, []byte("v2"), nil); err == nil {
		t.Error("CompareAndSwap to nil succeeded")
	}
	if got, err := kv.Get(k); err != nil || string(got) != "v2" {
		t.Fatalf("Get = %q, %v; want v2", got, err)
	}

	// One process at a time.
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(k); err == nil {
		t.Error("Get after Close succeeded")
	}
	if err := kv.CompareAndSwap(k, []byte("v2"), []byte("v3")); err == nil {
		t.Error("CompareAndSwap after Close succeeded")
	}

	// Durable across reopening.
	kv, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if got, err := kv.Get(k); err != nil || string(got) != "v2" {
		t.Fatalf("after reopening: Get = %q, %v; want v2", got, err)
	}
}

// TestKVConcurrentSwaps: of many swaps from the same value, exactly one
// wins; swaps of other keys go on meanwhile.
func TestKVConcurrentSwaps(t *testing.T) {
	kv, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	const keys, racers = 4, 16
	for round := range 5 {
		var wins [keys]atomic.Int32
		var wg sync.WaitGroup
		for k := range keys {
			key := fmt.Appendf(nil, "k%d", k)
			var old []byte
			if round > 0 {
				var err error
				if old, err = kv.Get(key); err != nil {
					t.Fatal(err)
				}
			}
			for r := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := kv.CompareAndSwap(key, old, fmt.Appendf(nil, "round %d racer %d", round, r))
					switch {
					case err == nil:
						wins[k].Add(1)
					case !errors.Is(err, witness.ErrConflict):
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		for k := range keys {
			if n := wins[k].Load(); n != 1 {
				t.Fatalf("round %d key %d: %d swaps won, want 1", round, k, n)
			}
		}
	}
}

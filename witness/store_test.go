package witness_test

import (
	"context"
	"errors"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesspebble"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestStores holds both stores to the Store contract: Swap records a note
// only over the one recorded now (none: nil), per origin.
func TestStores(t *testing.T) {
	kv, err := witnesspebble.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	for name, s := range map[string]witness.Store{"memory": witnesstest.NewStore(), "witnesspebble.KV": witness.KVStore(kv)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if got, err := s.Latest(ctx, "a"); got != nil || err != nil {
				t.Fatalf("Latest of a new origin = %q, %v", got, err)
			}
			if err := s.Swap(ctx, "a", []byte("x"), []byte("1")); !errors.Is(err, witness.ErrConflict) {
				t.Fatalf("Swap from a note never recorded: %v", err)
			}
			if err := s.Swap(ctx, "a", nil, []byte("1")); err != nil {
				t.Fatal(err)
			}
			if err := s.Swap(ctx, "a", nil, []byte("2")); !errors.Is(err, witness.ErrConflict) {
				t.Fatalf("Swap from none over a recorded note: %v", err)
			}
			if err := s.Swap(ctx, "a", []byte("1"), []byte("2")); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Latest(ctx, "a"); string(got) != "2" {
				t.Fatalf("Latest = %q", got)
			}
			if got, _ := s.Latest(ctx, "b"); got != nil {
				t.Fatalf("Latest of another origin = %q", got)
			}
		})
	}
}

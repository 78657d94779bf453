package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesspebble"
)

// bloated returns cp with n signature lines by keys no witness knows,
// each with a long name: what a log holding its key may send.
func bloated(cp []byte, n int) []byte {
	b := bytes.Clone(cp)
	sig := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 68))
	for i := range n {
		b = fmt.Appendf(b, "— %s.%d %s\n", strings.Repeat("x", 500), i, sig)
	}
	return b
}

// TestKeepsOnlyVerifiedSignatures: the witness records a checkpoint with
// only the log's signature it verified, not the ~60 KiB of other
// signature lines the request carried (it stored the note as sent, so a
// log could make every recorded checkpoint that large); and a store
// written that way before still reads.
func TestKeepsOnlyVerifiedSignatures(t *testing.T) {
	ctx := context.Background()
	kv, err := witnesspebble.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	f := newFixture(t, witness.KVStore(kv))
	f.a.Grow(t, 10)
	big := bloated(f.a.Checkpoint(t, 10), 90)
	if len(big) < 45<<10 {
		t.Fatalf("the bloated checkpoint has only %d bytes", len(big))
	}
	if status, _, body := f.post(t, withCheckpoint(request(t, f.a, 0, 10), big)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	rec, err := f.store.Latest(ctx, originA)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.a.Checkpoint(t, 10); !bytes.Equal(rec, want) {
		t.Errorf("recorded %d bytes, want the log's signed checkpoint (%d bytes):\n%.300s", len(rec), len(want), rec)
	}

	// A store an earlier witness wrote, holding the note as sent.
	kv2, err := witnesspebble.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer kv2.Close()
	f.store = witness.KVStore(kv2)
	if err := f.store.Swap(ctx, originA, nil, big); err != nil {
		t.Fatal(err)
	}
	w := f.newWitness(t)
	if _, err := w.AddCheckpoint(ctx, mustParse(t, request(t, f.a, 10, 20))); err != nil {
		t.Fatalf("from the old record: %v", err)
	}
	if rec, err := f.store.Latest(ctx, originA); err != nil || !bytes.Equal(rec, f.a.Checkpoint(t, 20)) {
		t.Errorf("recorded %.300s, %v; want the log's signed checkpoint of size 20", rec, err)
	}
}

func mustParse(t *testing.T, body string) *witness.AddCheckpointRequest {
	t.Helper()
	req, err := witness.ParseAddCheckpoint([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesspebble"
)

// TestWitnessDataOfE56b913: the data dir that provlog-witness of e56b913
// (main's first witness, 2026-11-30) wrote while cosigning the log of
// cmd/provlog/testdata/data-5e84559 (testdata/witness-e56b913: db/, its
// key and the log's vkey) stays readable: the checkpoint it recorded is
// the log's, signed by its key, and the witness serves on from it: the
// same checkpoint again is cosigned, an older one is refused as not
// consistent with what it recorded, and nothing it recorded changes.
func TestWitnessDataOfE56b913(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join("testdata", "witness-e56b913")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	vkey, err := os.ReadFile(filepath.Join(dir, "log.vkey"))
	if err != nil {
		t.Fatal(err)
	}
	lv, err := note.NewVerifier(string(vkey))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := readKey(filepath.Join(dir, "witness.key"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := witnesspebble.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatalf("opening the witness store e56b913 wrote: %v", err)
	}
	defer kv.Close()
	st := witness.KVStore(kv)
	const origin = "fixture.example/old"
	recorded, err := st.Latest(ctx, origin)
	if err != nil || recorded == nil {
		t.Fatalf("the recorded checkpoint of %s: %q (%v)", origin, recorded, err)
	}
	c, _, err := log.OpenCheckpoint(recorded, lv)
	if err != nil || c.Size == 0 {
		t.Fatalf("the recorded checkpoint: size %d (%v)", c.Size, err)
	}
	w, err := server.New(server.Options{Signer: signer, Logs: []server.Log{{Origin: origin, Verifiers: []note.Verifier{lv}}}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cosig, err := w.AddCheckpoint(ctx, &witness.AddCheckpointRequest{OldSize: c.Size, Checkpoint: recorded})
	if err != nil || len(cosig) == 0 {
		t.Errorf("the recorded checkpoint again: %q (%v), want a cosignature", cosig, err)
	}
	if _, err := w.AddCheckpoint(ctx, &witness.AddCheckpointRequest{OldSize: 0, Checkpoint: recorded}); err == nil {
		t.Errorf("a request from size 0 was cosigned, though %d is recorded", c.Size)
	}
	now, err := st.Latest(ctx, origin)
	if err != nil || string(now) != string(recorded) {
		t.Errorf("the recorded checkpoint changed: %q (%v)", now, err)
	}
}

package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// TestShownRecord: the two slots keep the newest checkpoint written, a
// torn slot is passed over for the other, the newest survives a reopen
// (the next write goes to the other slot), and slots that are both torn
// are an error, not an empty record.
func TestShownRecord(t *testing.T) {
	data := t.TempDir()
	signer, _ := logtest.NewKey(t, "provlog.test/shown")
	cp := func(size uint64) []byte {
		b, err := log.SignCheckpoint(log.Checkpoint{Origin: "provlog.test/shown", Size: size, Hash: bytes.Repeat([]byte{byte(size)}, 32)}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got, err := readShown(data); got != nil || err != nil {
		t.Fatalf("no slots: %q %v", got, err)
	}
	r, err := openShownRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint64{5, 9, 17} {
		if err := r.write(cp(n)); err != nil {
			t.Fatal(err)
		}
		if got, err := readShown(data); err != nil || !bytes.Equal(got, cp(n)) {
			t.Fatalf("after writing size %d: %q %v", n, got, err)
		}
	}
	r.close()
	// Size 17 is in slot 0 (written first, third); reopened, the next
	// write goes to slot 1, and a torn slot 1 leaves 17.
	r, _ = openShownRecord(data)
	r.write(cp(20))
	r.close()
	b, _ := os.ReadFile(shownSlot(data, 1))
	os.WriteFile(shownSlot(data, 1), b[:len(b)-10], 0o644)
	if got, err := readShown(data); err != nil || !bytes.Equal(got, cp(17)) {
		t.Fatalf("slot 1 torn: %q %v, want size 17's", got, err)
	}
	os.WriteFile(shownSlot(data, 0), []byte("provlog handed-out v1\n9\nxx"), 0o644)
	if _, err := readShown(data); err == nil {
		t.Fatal("both slots torn, and no error")
	}
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	if got, err := shownOut.read(data); got != nil || err != nil {
		t.Fatalf("no slots: %q %v", got, err)
	}
	r, err := shownOut.open(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint64{5, 9, 17} {
		if err := r.write(cp(n)); err != nil {
			t.Fatal(err)
		}
		if got, err := shownOut.read(data); err != nil || !bytes.Equal(got, cp(n)) {
			t.Fatalf("after writing size %d: %q %v", n, got, err)
		}
	}
	r.close()
	// Size 17 is in slot 0 (written first, third); reopened, the next
	// write goes to slot 1, and a torn slot 1 leaves 17.
	r, _ = shownOut.open(data, nil)
	r.write(cp(20))
	r.close()
	// A byte of slot 1's checksum flipped, as a crash while writing it
	// could leave it.
	b, _ := os.ReadFile(shownOut.slot(data, 1))
	b[bytes.LastIndexByte(b, '\n')-1] ^= 1
	os.WriteFile(shownOut.slot(data, 1), b, 0o644)
	if got, err := shownOut.read(data); err != nil || !bytes.Equal(got, cp(17)) {
		t.Fatalf("slot 1 torn: %q %v, want size 17's", got, err)
	}
	os.WriteFile(shownOut.slot(data, 0), []byte("provlog handed-out v1\n9\nxx"), 0o644)
	_, err = shownOut.read(data)
	if err == nil || !strings.Contains(err.Error(), shownOut.slot(data, 0)+" and "+shownOut.slot(data, 1)) || !strings.Contains(err.Error(), "remove them only if that is accepted") {
		t.Fatalf("both slots torn: %v, want an error naming both and what to do", err)
	}
	if _, err := shownOut.open(data, nil); err == nil {
		t.Fatal("opened the record for writing with both slots torn")
	}
}

// TestShownOldFiles: the slots as provlog wrote them before log/slots
// (testdata/handed-out-v1: checkpoints of size 17 in slot 0 and 9 in slot
// 1, each file cut to its record) are read, and the next write goes to
// slot 1, keeping 17 until it is whole.
func TestShownOldFiles(t *testing.T) {
	data := t.TempDir()
	for i := range 2 {
		b, err := os.ReadFile(filepath.Join("testdata", "handed-out-v1", fmt.Sprintf("handed-out.%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(shownOut.slot(data, i), b, 0o644)
	}
	old0, _ := os.ReadFile(shownOut.slot(data, 0))
	got, err := shownOut.read(data)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := log.ParseCheckpointNote(got); err != nil || c.Size != 17 {
		t.Fatalf("old slots: %q (%v), want the checkpoint of size 17", got, err)
	}
	signer, _ := logtest.NewKey(t, "provlog.test/shown")
	cp20, _ := log.SignCheckpoint(log.Checkpoint{Origin: "provlog.test/shown", Size: 20, Hash: bytes.Repeat([]byte{20}, 32)}, signer)
	r, err := shownOut.open(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.write(cp20); err != nil {
		t.Fatal(err)
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(shownOut.slot(data, 0)); !bytes.HasPrefix(b, old0) {
		t.Fatal("the first write overwrote the slot holding the newest checkpoint")
	}
	if got, err := shownOut.read(data); err != nil || !bytes.Equal(got, cp20) {
		t.Fatalf("after a write: %q %v, want size 20's", got, err)
	}
}

// TestShownSyncFailure: a slot that cannot be synced (here /dev/null,
// which takes writes and fails every fsync) keeps the record from opening,
// naming the file, so the sidecar hands nothing out unrecorded; before
// log/slots it was opened, written unsynced, and failed only at close.
func TestShownSyncFailure(t *testing.T) {
	data := t.TempDir()
	if err := os.Symlink(os.DevNull, shownOut.slot(data, 1)); err != nil {
		t.Fatal(err)
	}
	r, err := shownOut.open(data, nil)
	if err == nil {
		r.close()
		t.Fatal("opened a record whose slot cannot be synced")
	}
	if !strings.Contains(err.Error(), "syncing "+shownOut.slot(data, 1)) {
		t.Fatalf("%v, want it to name the failed sync of %s", err, shownOut.slot(data, 1))
	}
}

package logpebble

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// oldBatch is the batch testdata/published-v1.record holds, as the
// published record of 360fe5f (before log/slots) wrote it.
func oldBatch() *log.Batch {
	return &log.Batch{Start: 3, Entries: [][]byte{[]byte(`{"n":3}`), []byte(`{"n":4}`)}, State: log.State{
		Size:       5,
		Range:      [][]byte{bytes.Repeat([]byte{4}, 32), bytes.Repeat([]byte{1}, 32)},
		Checkpoint: []byte("provlog.test/published\n5\nAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n\n— provlog.test/published x\n"),
	}}
}

// TestPublishedOldFiles: slots written by the record before log/slots
// (one record zero-filled to publishedInitial, the other slot zeros) are
// read, the record is still written in that format, and the first write
// goes to the other slot.
func TestPublishedOldFiles(t *testing.T) {
	golden, err := os.ReadFile("testdata/published-v1.record")
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeRecord(nil, oldBatch()); !bytes.Equal(got, golden) {
		t.Fatalf("encodeRecord no longer writes the PLPUB1 record of testdata/published-v1.record:\n got %x\nwant %x", got, golden)
	}
	dir := t.TempDir()
	slot0 := append(bytes.Clone(golden), make([]byte, publishedInitial-len(golden))...)
	os.WriteFile(publishedName(dir, 0), slot0, 0o600)
	os.WriteFile(publishedName(dir, 1), make([]byte, publishedInitial), 0o600)
	rs, _, err := readRecords(dir)
	if err != nil || len(rs) != 1 || rs[0].slot != 0 || rs[0].start != 3 || rs[0].size != 5 {
		t.Fatalf("old slots: %+v, %v; want the batch [3, 5) in slot 0", rs, err)
	}
	if cp, err := NewestPublished(dir); err != nil || !bytes.Equal(cp, oldBatch().State.Checkpoint) {
		t.Fatalf("NewestPublished: %q, %v", cp, err)
	}
	failed := func(err error) { t.Errorf("the record failed: %v", err) }
	p, err := openPublisher(dir, rs, failed)
	if err != nil {
		t.Fatal(err)
	}
	next := &log.Batch{Start: 5, Entries: [][]byte{[]byte(`{"n":5}`)}, State: log.State{Size: 6, Range: [][]byte{bytes.Repeat([]byte{6}, 32)}, Checkpoint: []byte("six")}}
	if err := p.write(next); err != nil {
		t.Fatal(err)
	}
	p.close()
	if b, _ := os.ReadFile(publishedName(dir, 0)); !bytes.Equal(b, slot0) {
		t.Fatal("the first write overwrote the slot holding the newest record")
	}
	if rs, _, err := readRecords(dir); err != nil || len(rs) != 2 || rs[1].size != 6 || rs[1].slot != 1 {
		t.Fatalf("after a write: %+v, %v; want [3, 5) and then [5, 6) in slot 1", rs, err)
	}
}

// TestPublishedBothTorn: when both slots are damaged the store is refused,
// naming both files and what to do, rather than opened as if it had never
// published a batch.
func TestPublishedBothTorn(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 10)
	for i := range 2 {
		damage(t, publishedName(dir, i), 40, false)
	}
	s, err := Open(dir, faultOptions(t, nil))
	if err == nil {
		s.Close()
		t.Fatal("opened with both slots of the published record torn")
	}
	for _, want := range []string{publishedName(dir, 0) + " and " + publishedName(dir, 1) + " both hold a torn or damaged record", "move both files aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant it to say %q", err, want)
		}
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("%v: not ErrCorrupt", err)
	}
}

// TestPublishedSyncFailure: a slot whose sync fails (here /dev/null,
// which takes writes and fails every fsync) stops the store's commits,
// naming the file, and Open says so.
func TestPublishedSyncFailure(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 3)
	os.Remove(publishedName(dir, 1))
	if err := os.Symlink(os.DevNull, publishedName(dir, 1)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "syncing "+publishedName(dir, 1)) || log.FaultReason(err) != "I/O error" {
		t.Fatalf("Err: %v, want an I/O error syncing %s", err, publishedName(dir, 1))
	}
}

package logpebble

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// newestWAL is the path of the newest Pebble write-ahead log in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(ms) == 0 {
		t.Fatalf("no WAL in %s: %v", dir, err)
	}
	sort.Strings(ms)
	return ms[len(ms)-1]
}

// damage changes the file at path: flips the byte at off (from the end if
// negative), or, with cut, truncates it by -off bytes.
func damage(t *testing.T, path string, off int64, cut bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	if cut {
		b = b[:off]
	} else {
		b[off] ^= 0x40
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeLog appends n entries one at a time (one batch each) to a new log
// in dir and closes it, as a kill -9 after every call was answered leaves
// it: everything in the WAL, nothing flushed.
func writeLog(t *testing.T, dir string, n int) []acked {
	t.Helper()
	signer, v := logtest.NewKey(t, "faults.example/log")
	l, err := openFaultLog(t, dir, nil, signer, v)
	if err != nil {
		t.Fatal(err)
	}
	if errs := l.appendAll("w", n, 1); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	l.close()
	return l.acked
}

// TestWALTailLoss damages the newest WAL of a closed log so that Pebble
// replays less than was acknowledged, and checks that the store never
// opens shorter without saying so: the last batch (which the published
// record holds) is restored, and a deeper loss is refused with both sizes.
func TestWALTailLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64
		cut  bool
		lost bool // more than the last batch is gone: refused
	}{
		{"flip-last-batch", -300, false, false},
		{"flip-3-batches-back", -3500, false, true},
		{"cut-last-batch", -300, true, false},
		{"cut-3-batches", -3500, true, true},
		{"flip-middle", 10000, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ack := writeLog(t, dir, 20)
			damage(t, newestWAL(t, dir), tc.off, tc.cut)
			if !tc.lost {
				// Read-only (as audit opens it), the batch is restored in
				// memory; then writable, for good.
				ro, err := Open(dir, &Options{ReadOnly: true})
				if err != nil {
					t.Fatalf("read-only Open: %v", err)
				}
				checkHoldsEntries(t, ro, ack)
				ro.Close()
			}
			s, err := Open(dir, faultOptions(t, nil))
			if !tc.lost {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
				checkHoldsEntries(t, s, ack)
				s.Close()
				damage(t, newestWAL(t, dir), -1, true) // what is restored is in Pebble now, not only in memory
				for i := range 2 {
					os.Remove(publishedName(dir, i))
				}
				if s, err = Open(dir, faultOptions(t, nil)); err != nil {
					t.Fatal(err)
				}
				checkHoldsEntries(t, s, ack)
				return
			}
			if err == nil {
				st, _ := s.State(t.Context())
				s.Close()
				t.Fatalf("Open of a log that lost acknowledged entries succeeded at size %d (acknowledged %d)", st.Size, ack[len(ack)-1].size)
			}
			var le *log.LostError
			if !errors.As(err, &le) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want a LostError or corruption", err)
			}
			if le != nil {
				if le.Size != ack[len(ack)-1].size || le.HeldSize >= le.Size {
					t.Fatalf("LostError sizes %d held %d, acknowledged %d", le.Size, le.HeldSize, ack[len(ack)-1].size)
				}
				if !strings.Contains(err.Error(), "new origin") {
					t.Fatalf("refusal does not tell the operator what to do: %v", err)
				}
			}
			t.Logf("refused: %v", err)
			// Read-only (as audit opens it) says the same.
			if _, rerr := Open(dir, &Options{ReadOnly: true}); rerr == nil || log.FaultReason(rerr) != log.FaultReason(err) {
				t.Fatalf("read-only Open: %v, want %v", rerr, err)
			}
		})
	}
}

// checkHoldsEntries is checkHolds without the audit (the entries' key is
// the writer's).
func checkHoldsEntries(t *testing.T, s *Store, ack []acked) {
	t.Helper()
	st, err := s.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ack {
		if a.size > st.Size {
			t.Fatalf("acknowledged size %d, store holds %d", a.size, st.Size)
		}
		got, err := s.Entries(t.Context(), a.index, a.index+1)
		if err != nil || string(got[0]) != string(a.entry) {
			t.Fatalf("entry %d: %v", a.index, err)
		}
		cp, err := s.Checkpoint(t.Context(), a.size)
		if err != nil || string(cp) != string(a.cp) {
			t.Fatalf("checkpoint %d differs: %v", a.size, err)
		}
	}
}

// flushedLog writes a log of n entries and flushes it to sstables.
func flushedLog(t *testing.T, dir string, n int) []acked {
	t.Helper()
	signer, v := logtest.NewKey(t, "faults.example/log")
	l, err := openFaultLog(t, dir, nil, signer, v)
	if err != nil {
		t.Fatal(err)
	}
	if errs := l.appendAll("f", n, 4); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if err := l.store.db.Flush(); err != nil {
		t.Fatal(err)
	}
	l.close()
	return l.acked
}

// tableOf names the sstable of the store in dir that holds key.
func tableOf(t *testing.T, dir string, key []byte) string {
	t.Helper()
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	levels, err := s.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range levels {
		for _, info := range ts {
			if bytes.Compare(info.Smallest.UserKey, key) <= 0 && bytes.Compare(key, info.Largest.UserKey) <= 0 {
				return filepath.Join(dir, info.FileNum.String()+".sst")
			}
		}
	}
	t.Fatalf("no sstable holds key %x", key)
	return ""
}

// TestCorruptSSTable flips a byte in the middle of an sstable: opening may
// fail naming the corruption, or succeed; then Verify finds it, the store
// stops taking commits, and a read of the damaged range fails naming the
// corruption. Nothing panics.
func TestCorruptSSTable(t *testing.T) {
	dir := t.TempDir()
	flushedLog(t, dir, 300)
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no sstable after a flush")
	}
	path := tableOf(t, dir, entryKey(0))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	damage(t, path, fi.Size()/3, false)
	s, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want corruption", err)
		}
		return
	}
	defer s.Close()
	if _, err := s.Verify(t.Context()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify: %v, want corruption", err)
	}
	if err := s.Err(); !errors.Is(err, log.ErrCorrupt) {
		t.Fatalf("Err after Verify found corruption: %v", err)
	}
	st, _ := s.State(t.Context())
	if _, err := s.Entries(t.Context(), 0, st.Size); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading every entry: %v, want corruption", err)
	}
	if _, err := Open(dir, &Options{ReadOnly: true}); err == nil {
		// (the writable store holds the lock)
		t.Fatal("second Open succeeded")
	}
}

// TestManifestDamage tears the MANIFEST's last record, or flips a byte in
// it: the store must not open as if nothing happened.
func TestManifestDamage(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  bool
	}{{"torn-tail", true}, {"flipped-last-record", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ack := flushedLog(t, dir, 300)
			ms, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
			sort.Strings(ms)
			damage(t, ms[len(ms)-1], -5, tc.cut)
			ro, err := Open(dir, &Options{ReadOnly: true})
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: %v, want corruption or a warning", err)
				}
				return
			}
			rep, err := ro.Verify(t.Context())
			ro.Close()
			if err == nil && len(rep.Warnings) == 0 {
				t.Fatal("a damaged MANIFEST passed Verify without a warning")
			}
			t.Logf("verify: %v %q", err, rep.Warnings)
			s, err := Open(dir, faultOptions(t, nil))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, log.ErrLost) {
					t.Fatalf("writable Open: %v", err)
				}
				return
			}
			defer s.Close()
			if len(s.warnings) == 0 {
				t.Fatal("writable Open kept no warning about the MANIFEST")
			}
			checkHoldsEntries(t, s, ack)
		})
	}
}

// TestPublishedRecordDamage flips a byte in the newer published record:
// that slot is ignored, the older one still guards the batch before it,
// and the store opens holding everything.
func TestPublishedRecordDamage(t *testing.T) {
	dir := t.TempDir()
	ack := writeLog(t, dir, 10)
	rs, _, err := readRecords(dir)
	if err != nil || len(rs) != 2 {
		t.Fatalf("records: %d, %v", len(rs), err)
	}
	damage(t, publishedName(dir, rs[1].slot), 40, false)
	if rs2, _, _ := readRecords(dir); len(rs2) != 1 || rs2[0].size != rs[0].size {
		t.Fatalf("after damaging the newer slot, records %v", rs2)
	}
	s, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkHoldsEntries(t, s, ack)
}

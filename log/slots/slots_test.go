package slots

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// A test record is a magic, its seq (8 bytes), a body, and a trailer
// repeating the seq: a record torn in its magic or trailer fails to parse.
func encode(seq uint64, body string) []byte {
	b := binary.BigEndian.AppendUint64([]byte("rec\n"), seq)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint64(b, seq)
}

func parse(b []byte) (string, uint64, bool) {
	b, ok := bytes.CutPrefix(b, []byte("rec\n"))
	if !ok || len(b) < 12 {
		return "", 0, false
	}
	seq, n := binary.BigEndian.Uint64(b), int(binary.BigEndian.Uint32(b[8:]))
	if 12+n+8 > len(b) || binary.BigEndian.Uint64(b[12+n:]) != seq {
		return "", 0, false
	}
	return string(b[12 : 12+n]), seq, true
}

func testOptions(dir string) Options {
	return Options{Names: [2]string{filepath.Join(dir, "rec.0"), filepath.Join(dir, "rec.1")}, Perm: 0o600, Initial: 64}
}

// read reads o's slots and returns the bodies, oldest first.
func read(t *testing.T, o Options) []string {
	t.Helper()
	rs, _, err := Read(o, parse)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Value)
	}
	return got
}

func equal(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

// TestWriteRead: each write overwrites the older slot, a record that
// outgrows its slot grows the file, and a reopened Writer goes on with
// the slot not holding the newest record, in both sync modes.
func TestWriteRead(t *testing.T) {
	for _, every := range []time.Duration{0, time.Hour} {
		o := testOptions(t.TempDir())
		o.SyncInterval = every
		if got := read(t, o); len(got) != 0 {
			t.Fatalf("no files: %q", got)
		}
		w, err := Open(o, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, o); len(got) != 0 {
			t.Fatalf("made, never written: %q", got)
		}
		long := strings.Repeat("x", 200) // over Initial
		for i, body := range []string{"one", "two", long} {
			if err := w.Write(encode(uint64(i+1), body)); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := read(t, o), []string{"two", long}; !equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rs, _, _ := Read(o, parse)
		if Next(rs) != 1 {
			t.Fatalf("next slot %d, want 1 (slot 0 holds the newest)", Next(rs))
		}
		w, err = Open(o, Next(rs))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(encode(4, "four"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := read(t, o), []string{long, "four"}; !equal(got, want) {
			t.Fatalf("after reopening: got %q, want %q", got, want)
		}
	}
}

// TestTorn: a slot torn while it was written is passed over for the
// other, with no error, also when the other was never written; two torn
// slots are refused, naming both.
func TestTorn(t *testing.T) {
	o := testOptions(t.TempDir())
	w, err := Open(o, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(encode(1, "first"))
	w.Write(encode(2, "second"))
	w.Close()
	// Slot 1 is torn in its trailer, as a crash while writing a third
	// record there would leave it.
	tear := func(i, off int) {
		b, _ := os.ReadFile(o.Names[i])
		b[off] ^= 0xff
		os.WriteFile(o.Names[i], b, 0o600)
	}
	tear(1, 4+12+len("second"))
	if got, want := read(t, o), []string{"first"}; !equal(got, want) {
		t.Fatalf("slot 1 torn: got %q, want %q", got, want)
	}
	if _, torn, _ := Read(o, parse); len(torn) != 1 || torn[0] != o.Names[1] {
		t.Fatalf("slot 1 torn: Read names %q as torn, want it alone", torn)
	}
	// Never written and torn: the first record was torn, before anyone
	// was told of it.
	os.WriteFile(o.Names[0], make([]byte, 64), 0o600)
	if got := read(t, o); len(got) != 0 {
		t.Fatalf("slot 0 zero, slot 1 torn: got %q, want nothing", got)
	}
	os.WriteFile(o.Names[0], encode(1, "first"), 0o600)
	tear(0, 0)
	_, _, err = Read(o, parse)
	if err == nil || !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), o.Names[0]+" and "+o.Names[1]+" both hold a torn or damaged record") {
		t.Fatalf("both torn: %v, want a corrupt error naming both files", err)
	}
	if _, err := Open(o, 0); err != nil {
		t.Fatalf("Open does not read the slots, so it cannot refuse them: %v", err)
	}
}

// devNull opens /dev/null for writing: it takes writes and fails every
// fdatasync (EINVAL), as a slot whose disk stopped syncing does.
func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syncData(f); !errors.Is(err, syscall.EINVAL) {
		if runtime.GOOS == "linux" {
			t.Fatalf("fdatasync of %s: %v, not EINVAL", os.DevNull, err)
		}
		t.Skipf("fdatasync of %s: %v, not EINVAL", os.DevNull, err)
	}
	return f
}

// TestSyncFailure: a failed sync stops the Writer, which says so and
// which file, whether the sync was a Write's own or the background one;
// no later Write reaches a slot.
func TestSyncFailure(t *testing.T) {
	for _, every := range []time.Duration{0, time.Millisecond} {
		o := testOptions(t.TempDir())
		o.SyncInterval = every
		failed := make(chan error, 1)
		o.Fail = func(err error) { failed <- err }
		w, err := Open(o, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(encode(1, "one")); err != nil {
			t.Fatal(err)
		}
		w.files[1].Close()
		w.files[1] = devNull(t)
		err = w.Write(encode(2, "two"))
		if every > 0 {
			if err != nil {
				t.Fatalf("background sync: Write failed before the sync did: %v", err)
			}
			select {
			case err = <-failed:
			case <-time.After(time.Minute): // a failsafe, not a bound on speed
				t.Fatal("no background sync in a minute")
			}
		}
		if err == nil || !errors.Is(err, syscall.EINVAL) || !errors.Is(err, log.ErrIO) || !strings.Contains(err.Error(), "the record stopped: I/O error: syncing "+o.Names[1]) {
			t.Fatalf("every %v: %v, want the record stopped, naming the failed sync of %s", every, err, o.Names[1])
		}
		if werr := w.Write(encode(3, "three")); werr == nil || werr.Error() != err.Error() {
			t.Fatalf("every %v: a Write after the failure: %v, want %v", every, werr, err)
		}
		if cerr := w.Close(); cerr == nil || cerr.Error() != err.Error() {
			t.Fatalf("every %v: Close: %v, want %v", every, cerr, err)
		}
		if got, want := read(t, o), []string{"one"}; !equal(got, want) {
			t.Fatalf("every %v: slots hold %q, want %q (nothing after the failure)", every, got, want)
		}
	}
}

// TestWriteFailure: a slot that fails a write (a full disk) stops the
// Writer, naming the file.
func TestWriteFailure(t *testing.T) {
	o := testOptions(t.TempDir())
	w, err := Open(o, 0)
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.OpenFile("/dev/full", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err) // Linux has it
	}
	w.files[0].Close()
	w.files[0] = full
	err = w.Write(encode(1, "one"))
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, log.ErrDiskFull) || !strings.Contains(err.Error(), "the record stopped: disk full: writing "+o.Names[0]) {
		t.Fatalf("%v, want the record stopped, naming the failed write of %s", err, o.Names[0])
	}
	if werr := w.Write(encode(2, "two")); werr == nil {
		t.Fatal("a Write after the failure went through")
	}
	w.Close()
}

package witnesspebble

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/provlog/provlog/log"
)

// cpNote returns a checkpoint note of origin at size, with a root made from
// tag, signed by nobody (the KV parses only the checkpoint).
func cpNote(origin string, size uint64, tag string) []byte {
	root := sha256.Sum256([]byte(tag))
	c := log.Checkpoint{Origin: origin, Size: size, Hash: root[:]}
	return []byte(c.String() + "\n— nobody AAAAAAAA\n")
}

func swap(t *testing.T, dir string, old, new []byte) {
	t.Helper()
	kv, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.CompareAndSwap([]byte("checkpoint/log.example/a"), old, new); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// TestBehindRecordRefused: a Pebble state behind the record (as a
// write-ahead log that lost its synced tail leaves it) is refused, naming
// the origin, both sizes and the file, and nothing is written.
func TestBehindRecordRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ahead    []byte // what the record saw, after the copy
		wantMsgs []string
	}{
		{"behind", cpNote("log.example/a", 5, "r5"), []string{`"log.example/a"`, "size 4", "size 5", "recorded."}},
		{"other root", cpNote("log.example/a", 4, "other"), []string{`"log.example/a"`, "size 4", "another root", "recorded."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := t.TempDir(), filepath.Join(t.TempDir(), "b")
			n4 := cpNote("log.example/a", 4, "r4")
			swap(t, a, nil, n4)
			copyDir(t, a, b) // b: Pebble and record at 4
			if tc.name == "other root" {
				// a: a history where 4 had another root.
				a = t.TempDir()
				swap(t, a, nil, tc.ahead)
			} else {
				swap(t, a, n4, tc.ahead)
			}
			var before [2][]byte
			for i := range 2 {
				name := filepath.Join(b, "recorded."+string(rune('0'+i)))
				rb, err := os.ReadFile(filepath.Join(a, filepath.Base(name)))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, rb, 0o600); err != nil {
					t.Fatal(err)
				}
				before[i] = rb
			}
			kv, err := Open(b)
			if err == nil {
				kv.Close()
				t.Fatal("opened a store whose Pebble state is behind its record")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Open: %v, want ErrCorrupt", err)
			}
			for _, m := range tc.wantMsgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Open: %v; does not name %s", err, m)
				}
			}
			for i := range 2 {
				rb, _ := os.ReadFile(filepath.Join(b, "recorded."+string(rune('0'+i))))
				if !bytes.Equal(rb, before[i]) {
					t.Errorf("the refused Open rewrote recorded.%d", i)
				}
			}
		})
	}
}

// TestKillBetweenWrites kills the process (SIGKILL) after Pebble synced a
// checkpoint and before the record was written: the store reopens, at the
// new checkpoint (the record one step behind), and goes on.
func TestKillBetweenWrites(t *testing.T) {
	k := []byte("checkpoint/log.example/a")
	n4, n5, n6 := cpNote("log.example/a", 4, "r4"), cpNote("log.example/a", 5, "r5"), cpNote("log.example/a", 6, "r6")
	if dir := os.Getenv("WITNESSPEBBLE_KILL_DIR"); dir != "" {
		kv, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.CompareAndSwap(k, nil, n4); err != nil {
			t.Fatal(err)
		}
		kv.testingOnlyRecorded = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		kv.CompareAndSwap(k, n4, n5)
		t.Fatal("not killed")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillBetweenWrites$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WITNESSPEBBLE_KILL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper: %v, want killed by SIGKILL\n%s", err, out)
	}
	r, _, err := readRecorded(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.marks[string(k)].size; got != 4 {
		t.Fatalf("record after the kill at size %d, want 4 (written before the kill)", got)
	}
	kv, err := Open(dir)
	if err != nil {
		t.Fatalf("reopening after a kill between the writes: %v", err)
	}
	if got, err := kv.Get(k); err != nil || !bytes.Equal(got, n5) {
		t.Fatalf("after the kill: Get = %q, %v; want the checkpoint at 5 Pebble synced", got, err)
	}
	if err := kv.CompareAndSwap(k, n5, n6); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if r, _, err = readRecorded(dir); err != nil || r.marks[string(k)].size != 6 {
		t.Fatalf("record after the next swap: %v, %v; want size 6", r.marks, err)
	}
}

func FuzzDecodeRecorded(f *testing.F) {
	f.Add(encodeRecorded(nil, 1, map[string]mark{"checkpoint/a": {size: 5, root: make([]byte, 32)}}))
	f.Add(encodeRecorded(nil, 7, map[string]mark{}))
	f.Add(append(encodeRecorded(nil, 2, map[string]mark{"k": {size: 1}}), 0, 0, 0))
	f.Add([]byte(recordedMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := decodeRecorded(b)
		if !ok {
			return
		}
		again := encodeRecorded(nil, r.seq, r.marks)
		if !bytes.HasPrefix(b, again) {
			t.Fatalf("decoded %v from %x, which encodes as %x", r, b, again)
		}
	})
}

// TestRecordWithoutPebbleRefused: a record naming a checkpoint Pebble
// does not hold at all is refused.
func TestRecordWithoutPebbleRefused(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	swap(t, a, nil, cpNote("log.example/a", 3, "r3"))
	kv, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	kv.Close()
	for _, n := range []string{"recorded.0", "recorded.1"} {
		rb, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b, n), rb, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kv, err = Open(b)
	if err == nil {
		kv.Close()
		t.Fatal("opened a store whose Pebble lost a recorded checkpoint")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"log.example/a" at size 3, and Pebble holds none`) {
		t.Errorf("Open: %v, want ErrCorrupt naming the origin and size 3", err)
	}
}

// TestRecordConcurrentSwaps: swaps of many checkpoint keys at once share
// record writes, and the record holds each key's last checkpoint.
func TestRecordConcurrentSwaps(t *testing.T) {
	dir := t.TempDir()
	kv, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const logs, steps = 16, 20
	errs := make(chan error, logs)
	for i := range logs {
		go func() {
			origin := fmt.Sprintf("log.example/%d", i)
			var old []byte
			for n := range uint64(steps) {
				cp := cpNote(origin, n+1, fmt.Sprint(n))
				if err := kv.CompareAndSwap([]byte("checkpoint/"+origin), old, cp); err != nil {
					errs <- err
					return
				}
				old = cp
			}
			errs <- nil
		}()
	}
	for range logs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	r, _, err := readRecorded(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.marks) != logs {
		t.Fatalf("record holds %d keys, want %d", len(r.marks), logs)
	}
	for k, m := range r.marks {
		if m.size != steps {
			t.Errorf("record holds %s at size %d, want %d", k, m.size, steps)
		}
	}
	kv, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kv.Close()
}

// TestRecordOfOldStore: a store from before the record (no recorded.0 or
// .1) opens, and its checkpoints are recorded at once.
func TestRecordOfOldStore(t *testing.T) {
	dir := t.TempDir()
	k := "checkpoint/log.example/a"
	swap(t, dir, nil, cpNote("log.example/a", 7, "r7"))
	for _, n := range []string{"recorded.0", "recorded.1"} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := readRecorded(dir)
	kv.Close()
	if err != nil || r.marks[k].size != 7 {
		t.Fatalf("record after opening an old store: %v, %v; want %s at size 7", r.marks, err, k)
	}
}

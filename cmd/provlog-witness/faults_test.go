package main

// The witness as a crash and a full disk meet it: a real provlog-witness
// process killed with SIGKILL under concurrent add-checkpoint load, and
// one whose data dir is a tmpfs that fills up. Whatever happens, the
// witness never cosigned a checkpoint its store does not hold after a
// restart.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// startWitness starts `provlog-witness serve` on addr and waits until it
// listens.
func startWitness(t *testing.T, bin, cfgPath, addr string) (*exec.Cmd, *proctest.Buffer) {
	t.Helper()
	var stderr proctest.Buffer
	cmd := exec.Command(bin, "serve", "--config", cfgPath, "--http", addr)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	proctest.WaitListening(t, addr, "provlog-witness", &stderr)
	return cmd, &stderr
}

// addCheckpoint posts old and the log's checkpoint at size, with the
// proof between them, and returns the status and body; status 0 when the
// connection failed.
func addCheckpoint(t *testing.T, url string, l *witnesstest.Log, old, size uint64) (int, string) {
	t.Helper()
	return addPadded(t, url, l, old, size, 0)
}

// addPadded is addCheckpoint with the checkpoint padded by pad bytes
// (see padded), if pad is not 0.
func addPadded(t *testing.T, url string, l *witnesstest.Log, old, size uint64, pad int) (int, string) {
	t.Helper()
	req := &witness.AddCheckpointRequest{OldSize: old, Checkpoint: l.Checkpoint(t, size)}
	if pad > 0 {
		req.Checkpoint = padded(req.Checkpoint, pad)
	}
	if old > 0 && old < size {
		var err error
		if req.Proof, err = log.ProveConsistency(context.Background(), l.Store, old, size); err != nil {
			t.Error(err)
			return 0, ""
		}
	}
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(req.String()))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// witnessSize asks the witness for the size it last cosigned: a request
// from old size 0 that it answers with 409 and that size (or cosigns, at
// size 0, when it never did).
func witnessSize(t *testing.T, url string, l *witnesstest.Log) uint64 {
	t.Helper()
	status, body := addCheckpoint(t, url, l, 0, 1)
	if status == http.StatusOK {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(body), 10, 64)
	if status != http.StatusConflict || err != nil {
		t.Fatalf("asking the witness's size: %d %q", status, body)
	}
	return n
}

// load sends add-checkpoint requests for l from 8 goroutines, each from the
// size it last learned, until stop is closed or the witness stops
// answering (or l reaches max), raising cosigned to each size the witness
// cosigned.
func load(t *testing.T, url string, l *witnesstest.Log, max uint64, stop <-chan struct{}, cosigned *atomic.Uint64) {
	var known atomic.Uint64
	known.Store(witnessSize(t, url, l))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				old := known.Load()
				size := min(old+1+uint64((g+i)%3), max)
				status, body := addCheckpoint(t, url, l, old, size)
				switch status {
				case 0:
					return // killed
				case http.StatusOK:
					for c := cosigned.Load(); size > c && !cosigned.CompareAndSwap(c, size); c = cosigned.Load() {
					}
					for k := known.Load(); size > k && !known.CompareAndSwap(k, size); k = known.Load() {
					}
				case http.StatusConflict:
					n, _ := strconv.ParseUint(strings.TrimSpace(body), 10, 64)
					for k := known.Load(); n > k && !known.CompareAndSwap(k, n); k = known.Load() {
					}
				default:
					t.Errorf("old %d, size %d: %d %q", old, size, status, body)
					return
				}
				if size == max {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestKillUnderLoad kills a provlog-witness with SIGKILL while 8 clients
// race add-checkpoint requests for one log, three times. After each
// restart the witness is at a size no smaller than any it cosigned, and
// refuses a forked checkpoint at that size.
func TestKillUnderLoad(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/killed")
	l := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")
	const max = 3000
	l.Grow(t, max)
	cfgPath, _ := witnessSetup(t, k)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	url := "http://" + addr
	var cosigned atomic.Uint64
	for round := range 3 {
		cmd, stderr := startWitness(t, bin, cfgPath, addr)
		if got := witnessSize(t, url, l); got < cosigned.Load() {
			t.Fatalf("round %d: the restarted witness is at size %d; it cosigned size %d\n%s", round, got, cosigned.Load(), stderr)
		}
		if c := cosigned.Load(); c > 0 {
			evil.Grow(t, c)
			if status, body := addCheckpoint(t, url, evil, c, c); status != http.StatusConflict {
				t.Fatalf("round %d: a fork at the cosigned size %d: %d %q", round, c, status, body)
			}
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { load(t, url, l, max, stop, &cosigned); close(done) }()
		from := cosigned.Load()
		proctest.WaitFor(t, "a hundred sizes cosigned", func() bool { return cosigned.Load() >= min(from+100, max) })
		cmd.Process.Kill()
		cmd.Wait()
		close(stop)
		<-done
	}
	t.Logf("cosigned up to size %d over three kills", cosigned.Load())
}

// needMount runs mount with args, or fails the test in CI (CI=true) and
// skips it elsewhere: it needs root.
func needMount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("mount %s: %v: %s (this test needs root)", strings.Join(args, " "), err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", args[len(args)-1]).Run() })
}

// padded returns cp with a signature line by a key the witness does not
// know, of about n bytes: the witness ignores it and stores the note as
// sent, so a few requests fill a disk.
func padded(cp []byte, n int) []byte {
	junk := make([]byte, n*3/4)
	rand.Read(junk)
	return append(bytes.Clone(cp), "— junk.example/pad "+base64.StdEncoding.EncodeToString(junk)+"\n"...)
}

// TestFullDisk fills the tmpfs under a serving witness's data dir. The
// write that finds the disk full is a 500, and so is every request after
// it until a restart: Pebble had applied the failed write to its memtable,
// and the witness read it back (409 naming a size it never recorded) and
// cosigned from it. Restarted with space freed, the witness is at the
// size it last cosigned and goes on.
func TestFullDisk(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/full")
	l := witnesstest.NewLog(t, k, "honest")
	const max = 600
	l.Grow(t, max)
	cfgPath, _ := witnessSetup(t, k)
	mnt := filepath.Join(filepath.Dir(cfgPath), "state")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	needMount(t, "-t", "tmpfs", "-o", "size=12m", "tmpfs", mnt)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	url := "http://" + addr
	cmd, stderr := startWitness(t, bin, cfgPath, addr)
	post := func(old, size uint64) (int, string) { return addPadded(t, url, l, old, size, 60<<10) }
	if s, b := post(0, 1); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 64<<10))
	}
	f.Close()
	cosigned, size := uint64(1), uint64(2)
	for ; size <= max; size++ {
		status, body := post(cosigned, size)
		if status != http.StatusOK {
			if status != http.StatusInternalServerError {
				t.Errorf("size %d on a full disk: %d %q, want 500", size, status, body)
			}
			break
		}
		cosigned = size
	}
	if size > max {
		t.Fatalf("the witness cosigned up to %d on a full disk", max)
	}
	// What a log's client does next: retry from its size, and from the
	// size of the checkpoint whose write failed.
	for _, r := range [][2]uint64{{cosigned, size}, {size, size}, {size, size + 1}, {0, size}} {
		if s, b := post(r[0], r[1]); s != http.StatusInternalServerError {
			t.Errorf("old %d, size %d after the failed write: %d %q, want 500", r[0], r[1], s, b)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	startWitness(t, bin, cfgPath, addr)
	if got := witnessSize(t, url, l); got != cosigned && got != size {
		t.Fatalf("restarted, the witness is at size %d; it cosigned %d, and the write of %d failed\n%s", got, cosigned, size, stderr)
	} else if s, b := post(got, size+2); s != http.StatusOK {
		t.Fatalf("restarted with space: %d %q", s, b)
	}
}

// TestReadOnlyDataDir restarts a witness on its data dir remounted
// read-only (a remount under the running process is refused as busy; a
// failing write while serving is TestFullDisk's): it refuses to start,
// naming the dir and why.
func TestReadOnlyDataDir(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/ro")
	l := witnesstest.NewLog(t, k, "honest")
	l.Grow(t, 3)
	cfgPath, _ := witnessSetup(t, k)
	data := filepath.Join(filepath.Dir(cfgPath), "state")
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	cmd, _ := startWitness(t, bin, cfgPath, addr)
	if s, b := addCheckpoint(t, "http://"+addr, l, 0, 3); s != http.StatusOK {
		t.Fatalf("%d %q", s, b)
	}
	cmd.Process.Kill()
	cmd.Wait()
	needMount(t, "--bind", data, data)
	needMount(t, "-o", "remount,bind,ro", data)
	out, err := exec.Command(bin, "serve", "--config", cfgPath, "--http", addr).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), data) || !strings.Contains(string(out), "read-only file system") {
		t.Fatalf("serve on a read-only data dir: %v\n%s", err, out)
	}
}

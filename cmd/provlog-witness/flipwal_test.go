package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestFlippedWALTail flips one byte in the root hash of the checkpoint
// the witness last cosigned, in its store's write-ahead log, where it is
// the last record. Pebble reads a bad last record as a write torn by a
// crash and drops it: the restarted witness was at size 4 after it had
// cosigned 5, and would have cosigned another root at 5. It must refuse
// to start, naming the corruption, or still be at 5.
func TestFlippedWALTail(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/flip")
	l := witnesstest.NewLog(t, k, "honest")
	l.Grow(t, 6)
	cfgPath, _ := witnessSetup(t, k)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	url := "http://" + addr
	cmd, _ := startWitness(t, bin, cfgPath, addr)
	prev := uint64(0)
	for _, n := range []uint64{2, 3, 4, 5} {
		if st, b := addCheckpoint(t, url, l, prev, n); st != http.StatusOK {
			t.Fatalf("%d %q", st, b)
		}
		prev = n
	}
	cmd.Process.Kill()
	cmd.Wait()
	db := filepath.Join(filepath.Dir(cfgPath), "state", "db")
	wals, _ := filepath.Glob(filepath.Join(db, "*.log"))
	flipped := 0
	head := []byte("log.example/flip\n5\n")
	for _, w := range wals {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndex(b, head); i >= 0 {
			b[i+len(head)+3] ^= 1
			if err := os.WriteFile(w, b, 0o600); err != nil {
				t.Fatal(err)
			}
			flipped++
		}
	}
	if flipped != 1 {
		t.Fatalf("%d write-ahead logs of %v hold size 5", flipped, wals)
	}
	var stderr proctest.Buffer
	srv := exec.Command(bin, "serve", "--config", cfgPath, "--http", addr)
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() { srv.Process.Kill(); <-exited })
	if err := cmdtest.Up(func() bool { return strings.Contains(stderr.String(), "serving") }, exited, &stderr); err != nil {
		if !strings.Contains(stderr.String(), "corrupt") {
			t.Fatalf("restarted on a flipped byte: %v", err)
		}
		return
	}
	if got := witnessSize(t, url, l); got != 5 {
		t.Fatalf("restarted on a flipped byte in the record of size 5, the witness is at size %d and serving", got)
	}
}

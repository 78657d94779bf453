package main

import (
	"context"
	"fmt"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"golang.org/x/mod/sumdb/note"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestIdleConnectionsStarveNothing: a client with network access and no
// key opens connections and sends nothing. Each accepted connection holds
// a file descriptor until its header timeout; with no bound on them, the
// witness ran out of descriptors, its store could not open the files it
// needed, and it stopped cosigning for good (500 until a restart). The
// witness must go on cosigning the log's next checkpoint.
func TestIdleConnectionsStarveNothing(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/conns")
	l := witnesstest.NewLog(t, k, "honest")
	const max = 80
	l.Grow(t, max+1)
	cfgPath, _ := witnessSetup(t, k)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	url := "http://" + addr
	start := func() *exec.Cmd {
		t.Helper()
		var stderr proctest.Buffer
		// A small descriptor limit stands for a large one and as many
		// connections.
		cmd := exec.Command("prlimit", "--nofile=64:64", bin, "serve", "--config", cfgPath, "--http", addr)
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		proctest.WaitListening(t, addr, "provlog-witness", &stderr)
		return cmd
	}
	cmd := start()
	for _, s := range [][2]uint64{{0, 1}, {1, 2}, {2, 3}} {
		if st, b := addCheckpoint(t, url, l, s[0], s[1]); st != http.StatusOK {
			t.Fatalf("%v: %d %q", s, st, b)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	start()
	// One keep-alive connection of the log's client, open before the flood.
	if st, b := addCheckpoint(t, url, l, 3, 4); st != http.StatusOK {
		t.Fatalf("3->4: %d %q", st, b)
	}
	var conns []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	// Checkpoints with 60 KiB of extension lines: the witness keeps
	// them, so its store soon needs a new write-ahead log file.
	post := func(old, size uint64) (int, string) {
		c, err := log.ParseCheckpointNote(l.Checkpoint(t, size))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 60 {
			c.Extensions = append(c.Extensions, fmt.Sprintf("pad %d %s", i, strings.Repeat("x", 1000)))
		}
		signed, err := note.Sign(&note.Note{Text: c.String()}, k.Signer)
		if err != nil {
			t.Fatal(err)
		}
		req := &witness.AddCheckpointRequest{OldSize: old, Checkpoint: signed}
		if req.Proof, err = log.ProveConsistency(context.Background(), l.Store, old, size); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(req.String()))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	statuses := map[int]int{}
	cosigned := uint64(4)
	for size := uint64(5); size <= max; size++ {
		st, b := post(cosigned, size)
		statuses[st]++
		if st == http.StatusOK {
			cosigned = size
		} else if statuses[st] == 1 {
			t.Errorf("size %d with %d idle connections open: %d %q", size, len(conns), st, b)
		}
	}
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	mu.Unlock()
	if st, b := post(cosigned, max+1); st != http.StatusOK || statuses[http.StatusOK] != max-4 {
		t.Fatalf("answers during the flood %v (of %d); after it: %d %q", statuses, max-4, st, b)
	}
}

package main

// A purge killed (SIGKILL) in the middle of deleting many blobs, what the
// data dir holds afterwards, what audit says, and its rerun.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
)

// TestPurgeKilledMidway: a retention purge of 1,500 blobs (three purge
// entries' worth), run as its own process and killed with SIGKILL once it
// has deleted 256. Every blob an entry names is then either present or
// named by a committed purge entry, never silently missing; audit fails
// naming the unfinished purge, not missing payloads; the purge run again
// finishes it, and audit then passes counting all of them purged.
func TestPurgeKilledMidway(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 0)
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, false)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := blobs.Open(filepath.Join(data, blobDir))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	const total = 3*blobs.MaxPurgeBlobs - 36
	var sums []string
	for i := range total {
		h, err := dir.Put(fmt.Appendf(nil, `{"q":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, h)
		appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: old, Actor: "alice", Fields: map[string]any{
			"server": "s", "tool": "t", "args_sha256": h, "started": old.Format(log.TimeFormat)}})
	}
	seq.Close()
	store.Close()

	argv, _ := json.Marshal([]string{"purge", "--data", data, "--older-than", "24h", "--reason", "retention: 1d"})
	cmd := childCmd(t, serveChildEnv+"="+string(argv))
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	present := func() int {
		n := 0
		for _, h := range sums {
			if ok, _ := dir.Has(h); ok {
				n++
			}
		}
		return n
	}
	for present() > total-blobs.MaxPurgeBlobs/2 {
		select {
		case <-exited:
			t.Fatalf("the purge exited before it had deleted %d blobs: %s", blobs.MaxPurgeBlobs/2, stderr.String())
		case <-time.After(time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	left := present()
	if left == 0 {
		t.Fatalf("the purge finished before it was killed: raise total")
	}

	// Each blob: present, or named by a committed purge entry.
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.State(ctx)
	es, _ := s.Entries(ctx, 0, st.Size)
	s.Close()
	named, purges := map[string]bool{}, 0
	for _, b := range es {
		if e, _ := log.ParseEntry(b); e != nil && e.Kind == blobs.KindPurge {
			purges++
			pe, err := blobs.ParsePurge(e)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range pe.Blobs {
				named[h] = true
			}
		}
	}
	silent := 0
	for _, h := range sums {
		if ok, _ := dir.Has(h); !ok && !named[h] {
			silent++
		}
	}
	t.Logf("killed: %d of %d blobs left, %d purge entries naming %d", left, total, purges, len(named))
	if silent != 0 {
		t.Errorf("%d blobs missing that no purge entry names", silent)
	}
	out, code := runCmd(t, "audit", "--data", data)
	if unfinished := len(named) - (total - left); code != 1 || unfinished > 0 && !strings.Contains(out, "the purge did not finish") || unfinished == 0 && strings.Contains(out, "missing") {
		t.Errorf("audit after the killed purge (%d blobs left, %d named purged): exit %d\n%s", left, len(named), code, tail(out))
	}
	out, code = runCmd(t, "purge", "--data", data, "--older-than", "24h", "--reason", "retention: 1d")
	if code != 0 {
		t.Fatalf("the purge run again: %d %s", code, out)
	}
	if n := present(); n != 0 {
		t.Errorf("%d blobs left after the rerun", n)
	}
	out, code = runCmd(t, "audit", "--data", data)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("0 present and intact, %d purged", total)) {
		t.Errorf("audit after the rerun: exit %d\n%s", code, tail(out))
	}
}

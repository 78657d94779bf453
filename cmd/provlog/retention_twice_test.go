package main

// Two sidecars of one shared PostgreSQL log running retention at once.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestRetentionSharedOnce: sidecars A and B of one PostgreSQL log both
// run retention at the same moment over 200 old payloads. Each payload
// is recorded purged once: one purge entry names it, not one per
// sidecar, and audit counts each purged.
func TestRetentionSharedOnce(t *testing.T) {
	a, b := sharedPair(t, newGatedPrompt(t).url)
	ctx := context.Background()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	const total = 200
	for i := range total {
		h, err := a.blobs.Put(fmt.Appendf(nil, `{"q":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := (&log.Entry{Kind: log.KindCall, Time: old, Actor: "alice", Fields: map[string]any{
			"server": "s", "tool": "t", "args_sha256": h, "started": old.Format(log.TimeFormat)}}).Marshal()
		if _, err := a.seq.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	req := purgeRequest{Before: time.Now().UTC().Format(time.RFC3339Nano), Reason: "retention: test"}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 2)
	for i, sc := range []*sidecar{a, b} {
		wg.Go(func() {
			<-start
			_, errs[i] = purge(ctx, sc.seq, sc.store, sc.blobs, &sc.ages, purgeActor, req)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("sidecar %c's retention: %v", 'A'+i, err)
		}
	}
	st, err := a.store.(log.SharedStorage).Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	es, err := a.store.Entries(ctx, 0, st.Size)
	if err != nil {
		t.Fatal(err)
	}
	named, purges := map[string]int{}, 0
	for _, raw := range es {
		if e, _ := log.ParseEntry(raw); e != nil && e.Kind == blobs.KindPurge {
			purges++
			pe, _ := blobs.ParsePurge(e)
			for _, h := range pe.Blobs {
				named[h]++
			}
		}
	}
	twice := 0
	for _, n := range named {
		if n > 1 {
			twice++
		}
	}
	if len(named) != total || twice != 0 {
		t.Errorf("%d purge entries name %d of %d payloads, %d of them more than once: want each once", purges, len(named), total, twice)
	}
	a.close()
	b.close()
	cfgFile := filepath.Join(t.TempDir(), "provlog.yaml")
	if err := os.WriteFile(cfgFile, []byte("data: "+a.cfg.Data+"\nstore: "+a.cfg.Store+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCmd(t, "audit", "--data", a.cfg.Data, "--config", cfgFile); code != 0 || !strings.Contains(out, fmt.Sprintf("0 present and intact, %d purged", total)) {
		t.Errorf("audit after both retentions: exit %d\n%s", code, tail(out))
	}
	// The purge key's row names a purge entry; moved by hand, audit says so.
	pgtest.Psql(t, a.cfg.Store, "UPDATE provlog_keys SET last = 1 WHERE key = '"+purgeFence+"'")
	if out, code := runCmd(t, "audit", "--data", a.cfg.Data, "--config", cfgFile); code == 0 || !strings.Contains(out, `fence key "purge:": names entry 1, but it is not a purge entry`) {
		t.Errorf("audit after the purge key's row moved to a call: exit %d\n%s", code, tail(out))
	}
}

// tail is the last lines of a command's output, for a test's message.
func tail(s string) string {
	if l := strings.Split(s, "\n"); len(l) > 6 {
		return strings.Join(l[len(l)-6:], "\n")
	}
	return s
}

package main

// An erasure asked of a sidecar while its retention is deleting.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// TestPurgeErasureDuringRetention: a sidecar's retention is deleting 600
// old payloads of alice's when an erasure of alice's payloads (POST
// /log/purge) comes in. No call is under way, and each payload is
// recorded purged once: the erasure does not write a purge entry naming
// what the retention's entry names, nor fail saying calls under way name
// them.
func TestPurgeErasureDuringRetention(t *testing.T) {
	ctx := context.Background()
	a := mustOpenSidecar(t, &Config{Data: filepath.Join(t.TempDir(), "data"), Actor: "local"})
	defer a.close()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	const total = 600
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
	type outcome struct {
		res *purgeResult
		err error
	}
	erased := make(chan outcome, 1)
	var bs *blobs.Store
	bs = blobs.New(&afterDeletes{Store: a.blobs, n: 1, hook: func() {
		go func() {
			res, err := purge(ctx, a.seq, a.store, bs, &a.ages, "op", purgeRequest{Actor: "alice", Reason: "erasure request #9"})
			erased <- outcome{res, err}
		}()
	}})
	if _, err := purge(ctx, a.seq, a.store, bs, &a.ages, purgeActor, purgeRequest{
		Before: time.Now().UTC().Format(time.RFC3339Nano), Reason: "retention: test"}); err != nil {
		t.Fatal(err)
	}
	o := <-erased
	if o.err != nil && strings.Contains(o.err.Error(), "calls under way") {
		t.Errorf("the erasure during retention: %v", o.err)
	}
	st, _ := a.store.State(ctx)
	es, _ := a.store.Entries(ctx, 0, st.Size)
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
}

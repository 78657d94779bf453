package main

// A purge run by the running sidecar (POST /log/purge, the background
// retention) while calls go on.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// hookedStore is the sidecar's own store, whose first Entries call first
// runs hook: the point at which a purge reads the log to plan.
type hookedStore struct {
	log.Storage
	once sync.Once
	hook func()
}

func (s *hookedStore) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	s.once.Do(s.hook)
	return s.Storage.Entries(ctx, start, end)
}

// TestPurgeRetentionRacesCall: retention by age keeps a blob that an
// entry newer than the cut names (README: "Retention by age keeps a blob
// that a newer entry also names"), also when that entry is committed
// while the purge plans: here a call whose kept result is the same blob
// as an old call's is made, and committed, while the purge reads the
// log, after it took the log's size. The purge is the real one POST
// /log/purge and runRetention run, on the sidecar's own sequencer, store
// and blobs; only the moment of the call is forced, by a hook on the
// store's reader. Before, the blob was deleted: the proxy found it
// present and wrote nothing, and the purge judged by the log as it was
// when it began.
func TestPurgeRetentionRacesCall(t *testing.T) {
	_, _, cfg := retainingEcho(t)
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	cs, closeClient := memClient(t, sc, "purge-test")
	defer closeClient()
	echo := &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "shared result"}}
	if res, err := cs.CallTool(ctx, echo); err != nil || res.IsError {
		t.Fatalf("old call: %v %v", err, res)
	}
	size, _ := sc.seq.Checkpoint()
	blob, _ := sidecarEntry(t, sc, size-1).Fields["result_sha256"].(string)
	if ok, _ := sc.blobs.Has(blob); blob == "" || !ok {
		t.Fatalf("the old call kept no blob")
	}

	// The cut: after the old call, before the new one.
	cut := time.Now()
	for !time.Now().After(cut) {
		time.Sleep(time.Millisecond)
	}
	var newResult uint64
	hs := &hookedStore{Storage: sc.store, hook: func() {
		if res, err := cs.CallTool(ctx, echo); err != nil || res.IsError {
			t.Errorf("new call: %v %v", err, res)
		}
		n, _ := sc.seq.Checkpoint()
		newResult = n - 1
	}}
	res, err := purge(ctx, sc.seq, hs, sc.blobs, &ageIndex{}, purgeActor, purgeRequest{
		Before: cut.UTC().Format(time.RFC3339Nano), Reason: "retention: test"})
	if err != nil {
		t.Fatal(err)
	}
	e := sidecarEntry(t, sc, newResult)
	if e.Kind != log.KindCallResult || e.Fields["result_sha256"] != blob || !e.Time.After(cut) {
		t.Fatalf("entry %d: %s %v at %v, want the new call.result naming %s after the cut %v", newResult, e.Kind, e.Fields, e.Time, blob, cut)
	}
	if ok, err := sc.blobs.Has(blob); !ok || err != nil {
		t.Errorf("retention (purge entries %v) deleted blob %s, which call.result entry %d, written at %v after the cut %v, names as its retained result",
			res.Entries, blob[:12], newResult, e.Time.Format(time.RFC3339Nano), cut.Format(time.RFC3339Nano))
	}
}

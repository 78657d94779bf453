package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
)

// afterDeletes is a blob store (another Store beneath) that runs hook
// when it is about to delete its nth blob.
type afterDeletes struct {
	*blobs.Store
	n       int64
	deleted atomic.Int64
	hook    func()
}

func (a *afterDeletes) ReadBlob(name string) ([]byte, error) { return a.Get(name) }
func (a *afterDeletes) WriteBlob(_ string, data []byte) error {
	_, err := a.Put(data)
	return err
}
func (a *afterDeletes) HasBlob(name string) (bool, error) { return a.Has(name) }
func (a *afterDeletes) DeleteBlob(name string) error {
	if a.deleted.Add(1) == a.n {
		a.hook()
	}
	return a.Purge(name)
}

// TestPurgeChunkFailsMidway: a purge of more blobs than one purge entry
// holds is recorded in several entries, each chunk's blobs deleted once
// its entry is in. When the log stops taking entries after the first
// chunk's are deleted, the purge's error says what was done: the purge
// entry written and the blobs deleted, and that the rest were not. Before,
// it said "nothing was deleted", though blobs.MaxPurgeBlobs were.
func TestPurgeChunkFailsMidway(t *testing.T) {
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
	defer store.Close()
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	dir, err := blobs.Open(filepath.Join(data, blobDir))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	total := blobs.MaxPurgeBlobs + 40
	for i := range total {
		h, err := dir.Put(fmt.Appendf(nil, `{"q":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: old, Actor: "alice", Fields: map[string]any{
			"server": "s", "tool": "t", "args_sha256": h, "started": old.Format(log.TimeFormat)}})
	}
	ad := &afterDeletes{Store: dir, n: blobs.MaxPurgeBlobs, hook: func() { seq.Close() }}
	_, err = purge(ctx, seq, store, blobs.New(ad), nil, operatorActor, purgeRequest{Actor: "alice", Reason: "erasure request #7"})
	if err == nil {
		t.Fatal("the purge succeeded though the log stopped after its first chunk")
	}
	gone := 0
	for i := range total {
		if ok, _ := dir.Has(blobs.Sum(fmt.Appendf(nil, `{"q":%d}`, i))); !ok {
			gone++
		}
	}
	if gone != blobs.MaxPurgeBlobs {
		t.Fatalf("%d blobs deleted, want the first chunk's %d", gone, blobs.MaxPurgeBlobs)
	}
	msg := err.Error()
	if strings.Contains(msg, "nothing was deleted") || !strings.Contains(msg, fmt.Sprintf("%d blobs", gone)) || !strings.Contains(msg, fmt.Sprint(total)) {
		t.Errorf("the purge deleted %d of %d blobs, then failed saying: %s", gone, total, msg)
	}
}

package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// corruptStore is a store whose node reads meet corruption once broken,
// and which then reports it (log.Health), as logpebble does.
type corruptStore struct {
	*logtest.Memory
	broken atomic.Bool
	// entriesFrom, once above 0, makes reads of entries from index
	// entriesFrom-1 on meet corruption, as a damaged block would.
	entriesFrom atomic.Uint64
}

func (s *corruptStore) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	if f := s.entriesFrom.Load(); f > 0 && end > f-1 {
		return nil, fmt.Errorf("reading entries: %w: block checksum mismatch in 000043.sst", log.ErrCorrupt)
	}
	return s.Memory.Entries(ctx, start, end)
}

func (s *corruptStore) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	if s.broken.Load() {
		return nil, fmt.Errorf("reading nodes: %w: block checksum mismatch in 000042.sst", log.ErrCorrupt)
	}
	return s.Memory.ReadNodes(ctx, ids)
}

func (s *corruptStore) Err() error {
	if s.broken.Load() {
		return fmt.Errorf("%w: block checksum mismatch in 000042.sst", log.ErrCorrupt)
	}
	return nil
}

// TestStoreCorruption: once the store reports corruption, proofs answer
// 500 with a message naming it (not "internal error"), the checkpoint is
// still served, and appends are refused before they are queued, naming
// the fault.
func TestStoreCorruption(t *testing.T) {
	store := &corruptStore{Memory: logtest.NewMemory()}
	l := buildLog(t, store, 40)
	srv := httptest.NewServer(NewAPI(APIOptions{Store: l.store, Seq: l.seq}))
	defer srv.Close()
	store.broken.Store(true)
	resp, err := http.Get(srv.URL + "/log/proof/inclusion?index=3")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "corrupt") || !strings.Contains(body, "000042.sst") {
		t.Fatalf("proof on a corrupt store: %d %q", resp.StatusCode, body)
	}
	if resp, err := http.Get(srv.URL + "/log/checkpoint"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("checkpoint on a corrupt store: %v %v", resp, err)
	}
	if _, err := l.seq.Append(context.Background(), []byte("after")); log.FaultReason(err) != "corrupt" {
		t.Fatalf("append on a corrupt store: %v", err)
	}
	if log.FaultReason(l.seq.Err()) != "corrupt" {
		t.Fatalf("Sequencer.Err: %v", l.seq.Err())
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestEntryBundleCutOff: an entry bundle whose first entries cannot be
// read is answered 500, naming the fault; one whose later entries cannot
// be read, after its first part was sent, is cut off with the connection,
// so the client gets an error, never a shorter bundle as if whole.
func TestEntryBundleCutOff(t *testing.T) {
	store := &corruptStore{Memory: logtest.NewMemory()}
	l := buildLog(t, store, log.TileWidth)
	srv := httptest.NewServer(NewAPI(APIOptions{Store: l.store, Seq: l.seq}))
	defer srv.Close()
	path := srv.URL + "/log/" + log.Tile{Level: -1, N: 0, W: log.TileWidth}.Path()

	store.entriesFrom.Store(1)
	resp, err := http.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "000043.sst") {
		t.Fatalf("bundle whose first entries are corrupt: %d %q", resp.StatusCode, body)
	}

	// The first part may still sit in the server's buffer when the answer
	// is cut off: the error then comes before the status.
	store.entriesFrom.Store(bundleChunk + 1)
	resp, err = http.Get(path)
	if err == nil {
		defer resp.Body.Close()
		b, rerr := io.ReadAll(resp.Body)
		if rerr == nil {
			t.Fatalf("bundle whose entries from %d on are corrupt: %s with %d bytes read without an error", bundleChunk, resp.Status, len(b))
		}
		err = rerr
	}
	t.Logf("bundle whose entries from %d on are corrupt: %v", bundleChunk, err)
}

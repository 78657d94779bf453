package server

import (
	"context"
	"fmt"
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

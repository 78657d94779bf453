package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// TestEntryBundleMemory: 50 clients reading a full entry bundle of
// entries of the largest size at once (16 MiB each) do not make the API
// hold 50 bundles in memory: the heap the test process grows by stays
// below 800 MiB, where a bundle held whole, twice (its entries and their
// encoding), took some 1.6 GiB. Every client gets the whole bundle.
func TestEntryBundleMemory(t *testing.T) {
	for _, b := range backends {
		if b.name != "pebble" {
			continue
		}
		store, _ := b.open(t)
		signer, verifier := logtest.NewKey(t, "provlog.test/bundle-memory")
		seq, err := OpenSequencer(context.Background(), store, signer, verifier, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Close()
		entries := make([][]byte, log.TileWidth)
		for i := range entries {
			e := bytes.Repeat([]byte{byte('a' + i%26)}, log.MaxEntrySize)
			copy(e, fmt.Sprintf("%d:", i))
			entries[i] = e
			if _, err := seq.Append(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
		bundle, err := log.MarshalEntryBundle(entries)
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(bundle)
		bundle, entries = nil, nil
		srv := httptest.NewServer(NewAPI(APIOptions{Store: store, Seq: seq}))
		defer srv.Close()
		path := "/log/" + log.Tile{Level: -1, N: 0, W: log.TileWidth}.Path()
		get := func() error {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			h := sha256.New()
			if _, err := io.Copy(h, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || !bytes.Equal(h.Sum(nil), want[:]) {
				return fmt.Errorf("GET %s: %s, not the bundle", path, resp.Status)
			}
			return nil
		}
		if err := get(); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base, rssBase := ms.HeapAlloc, rss()
		var peak, rssPeak atomic.Uint64
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
				if r := rss(); r > rssPeak.Load() {
					rssPeak.Store(r)
				}
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		const clients = 50
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for range clients {
			wg.Go(func() {
				if err := get(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(done)
		<-sampled
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		grew := int64(peak.Load()) - int64(base)
		t.Logf("%d clients reading a full bundle of %d-byte entries: the heap grew by %d MiB at its peak; RSS from %d to %d MiB", clients, log.MaxEntrySize, grew>>20, rssBase>>20, rssPeak.Load()>>20)
		if grew >= 800<<20 {
			t.Errorf("%d clients reading a full entry bundle at once grew the heap by %d MiB: the API holds each bundle whole", clients, grew>>20)
		}
	}
}

// rss is the test process's resident set size in bytes (0 where
// /proc/self/statm cannot be read): logged, not asserted.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident uint64
	fmt.Sscan(string(b), &size, &resident)
	return resident * uint64(os.Getpagesize())
}

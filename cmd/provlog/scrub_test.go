package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestScrubFailsHealth: a flipped byte in the oldest checkpoints' block,
// which serve's start does not read: the sidecar starts and is healthy;
// then, with no call made, its background scrub meets the block, /healthz
// turns 503 "corrupt" with the scrub's last error, and /metrics counts it.
func TestScrubFailsHealth(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	cfg := &Config{Data: data, Actor: "local"}
	sc := mustOpenSidecar(t, cfg)
	// 400 entries of 30 KB are more than a memtable: Pebble flushes them to
	// an sstable.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				b := callEntry("scrub", "t", map[string]any{"g": g, "i": i, "pad": strings.Repeat("s", 30000)})
				if _, err := sc.seq.Append(ctx, b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var ssts []string
	proctest.WaitFor(t, "a flushed sstable", func() bool {
		ssts, _ = filepath.Glob(filepath.Join(data, dbDir, "*.sst"))
		return len(ssts) > 0
	})
	sc.close()
	// Pebble may have compacted the first sstables away meanwhile; the
	// closed store's files stay.
	ssts, _ = filepath.Glob(filepath.Join(data, dbDir, "*.sst"))
	sort.Strings(ssts)
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	// The file's first block holds the oldest checkpoints ('c' keys sort
	// first, keys.go), which starting does not read; the task engine's
	// replay reads every entry.
	b[100] ^= 0x40
	if err := os.WriteFile(ssts[0], b, 0o600); err != nil {
		t.Fatal(err)
	}

	every := 5 * time.Millisecond
	cfg.ScrubInterval = &every
	sc, err = openSidecar(ctx, cfg, quietLogger(), true)
	if err != nil {
		t.Fatalf("serve on a store whose damaged block its start does not read: %v", err)
	}
	defer sc.close()
	health := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		sc.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	var code int
	var h map[string]any
	deadline := time.Now().Add(20 * time.Second)
	// The store says it is corrupt a moment before the scrub notes why
	// in its own status; wait for both.
	found := func(h map[string]any) bool {
		scrub, _ := h["scrub"].(map[string]any)
		e, _ := scrub["last_error"].(string)
		return e != ""
	}
	for code, h = health(); code == http.StatusOK || !found(h); code, h = health() {
		if time.Now().After(deadline) {
			t.Fatalf("the scrub never met the damaged block: %v", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
	scrub, _ := h["scrub"].(map[string]any)
	if code != http.StatusServiceUnavailable || h["storage"] != "corrupt" || scrub == nil || !strings.Contains(scrub["last_error"].(string), "checksum") {
		t.Fatalf("/healthz %d %v", code, h)
	}
	rec := httptest.NewRecorder()
	sc.metrics(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{"\nprovlog_scrub_error 1\n", `provlog_storage_fault{reason="corrupt"} 1`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

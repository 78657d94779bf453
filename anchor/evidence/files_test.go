package evidence_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestHugeFile puts a file of 64 MiB and one byte (sparse: it costs no
// disk) into an evidence directory. Verify must refuse it by its size,
// naming it, before reading it: memory must not grow with a file an
// evidence cannot hold (a file of 4 GiB took 4 GiB).
func TestHugeFile(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
	dir := filepath.Join(t.TempDir(), "ev")
	if _, err := evidence.Write(ctx, dir, l.options(call)); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "context", "7.json")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 64<<20+1); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := evidence.Verify(ctx, dir, l.vkey)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "7.json is 67108865 bytes") {
		t.Errorf("Verify: %v; want it to refuse context/7.json by its size", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("Verify allocated %d bytes for a directory it refused", got)
	}
}

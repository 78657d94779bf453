package slots

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWrite measures a Write of a checkpoint-sized record (300
// bytes) that syncs before it returns (SyncInterval zero), back to back
// and after 1.5 ms idle (about what a commit to PostgreSQL takes between
// two Writes of a sidecar on a shared log), against one left to the
// background sync. It is what syncing the record before each hand-out
// adds to a commit.
func BenchmarkWrite(b *testing.B) {
	rec := bytes.Repeat([]byte{'c'}, 300)
	for _, c := range []struct {
		name  string
		every time.Duration
		idle  time.Duration
	}{
		{"synced/back-to-back", 0, 0},
		{"synced/after-1.5ms-idle", 0, 1500 * time.Microsecond},
		{"background/back-to-back", DefaultSyncInterval, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			w, err := Open(Options{Names: [2]string{filepath.Join(dir, "s.0"), filepath.Join(dir, "s.1")}, Perm: 0o600, Initial: 4096, SyncInterval: c.every}, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			b.ResetTimer()
			for b.Loop() {
				if c.idle > 0 {
					b.StopTimer()
					time.Sleep(c.idle)
					b.StartTimer()
				}
				if err := w.Write(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestCosignedChangesWhileRunning: a witness cosigns newer checkpoints
// while the sidecar runs, and the sidecar keeps the newest. The store is
// then put back to a copy taken between two of them (a stale backup
// restored, or a disk that lost the newer batches together with the
// store's published record): it holds the older cosigned checkpoint but
// not the newest. serve refuses and audit fails, both naming the newest
// (its size); with the older cosigned checkpoint in its place the same
// store opens, so the check is against the newest one the sidecar kept,
// not the one it started with.
func TestCosignedChangesWhileRunning(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.test/cosigned")
	ws := witnesstest.NewCosigner(t, "witness.example/w1")
	w := logWitness(t, ws, k.verifier)
	srv := httptest.NewServer(w)
	defer srv.Close()
	cfg := &Config{Data: data, Actor: "local",
		Witnesses:     []WitnessConfig{{URL: srv.URL, VKey: ws.Verifier().String()}},
		WitnessPolicy: WitnessPolicyConfig{Threshold: 1, Interval: 10 * time.Millisecond},
	}
	cosignedSize := func() uint64 {
		b, err := os.ReadFile(filepath.Join(data, cosignedFile))
		if err != nil {
			return 0
		}
		c, err := log.ParseCheckpointNote(b)
		if err != nil {
			return 0
		}
		return c.Size
	}
	// grow appends n entries and waits until the witness has cosigned the
	// log at its new size and the sidecar kept that checkpoint.
	grow := func(sc *sidecar, n int) uint64 {
		t.Helper()
		for i := range n {
			b := callEntry("cosigned", "t", map[string]any{"i": i})
			if _, err := sc.seq.Append(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		size, _ := sc.seq.Checkpoint()
		proctest.WaitFor(t, "the checkpoint cosigned", func() bool { return cosignedSize() == size })
		return size
	}

	sc := mustOpenSidecar(t, cfg)
	older := grow(sc, 10)
	sc.close()
	backup := filepath.Join(t.TempDir(), "db")
	copyDir(t, filepath.Join(data, dbDir), backup)
	olderNote, _ := os.ReadFile(filepath.Join(data, cosignedFile))

	sc = mustOpenSidecar(t, cfg)
	grow(sc, 5)
	newest := grow(sc, 5) // cosigned twice more while running
	sc.close()
	if newest <= older {
		t.Fatalf("cosigned sizes %d then %d", older, newest)
	}

	if err := os.RemoveAll(filepath.Join(data, dbDir)); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, filepath.Join(data, dbDir))
	want := fmt.Sprintf("a checkpoint of size %d", newest)
	_, err := openSidecar(ctx, cfg, quietLogger(), true)
	var lost *log.LostError
	if !errors.As(err, &lost) || lost.Size != newest || lost.HeldSize != older || !strings.Contains(err.Error(), cosignedFile) || !strings.Contains(err.Error(), want) {
		t.Fatalf("serve on a store behind the newest cosigned checkpoint (%d, store %d): %v", newest, older, err)
	}
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"audit", "--data", data}, &out, &errb); code == 0 || !strings.Contains(out.String()+errb.String(), want) {
		t.Fatalf("audit: exit %d, want a failure naming %q: %s%s", code, want, out.String(), errb.String())
	}

	// The older cosigned checkpoint alone would have let it through.
	newestNote, _ := os.ReadFile(filepath.Join(data, cosignedFile))
	if err := os.WriteFile(filepath.Join(data, cosignedFile), olderNote, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err = openSidecar(ctx, &Config{Data: data, Actor: "local"}, quietLogger(), true)
	if err != nil {
		t.Fatalf("serve with the older cosigned checkpoint: %v", err)
	}
	sc.close()
	if bytes.Equal(olderNote, newestNote) {
		t.Fatal("the cosigned checkpoint did not change while the sidecar ran")
	}
}

// copyDir copies the files of directory src to a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
}

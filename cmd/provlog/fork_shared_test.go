package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestForkRefusedShared: a sidecar on a shared PostgreSQL log refuses to
// serve when its data dir holds a checkpoint of the log that the shared
// tree contradicts (here a cosigned checkpoint with another root at an
// earlier size), as a Pebble sidecar does (TestForkRefused), and serves
// when what it holds is consistent.
func TestForkRefusedShared(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	data := filepath.Join(t.TempDir(), "data")
	cfg := &Config{Data: data, Actor: "local", Store: dsn}
	sc := mustOpenSidecar(t, cfg)
	for i := range 10 {
		e := &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "local", Fields: map[string]any{
			"server": "fork", "tool": "t", "args": map[string]any{"i": i},
		}}
		b, _ := e.Marshal()
		if _, err := sc.seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	size, own := sc.seq.Checkpoint()
	sc.close()
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}

	// The log's own checkpoint, kept as the cosigned one: consistent.
	if err := os.WriteFile(filepath.Join(data, cosignedFile), own, 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err = openSidecar(ctx, cfg, quietLogger(), true)
	if err != nil {
		t.Fatalf("serving a shared log that holds its own checkpoint: %v", err)
	}
	sc.close()

	// Another history at an earlier size.
	other, err := log.SignCheckpoint(log.Checkpoint{Origin: k.signer.Name(), Size: size - 2, Hash: bytes.Repeat([]byte{7}, 32)}, k.signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, cosignedFile), other, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = openSidecar(ctx, cfg, quietLogger(), true)
	if err == nil || !strings.Contains(err.Error(), "acknowledged entries lost") || !strings.Contains(err.Error(), "shared") {
		t.Fatalf("serve on a shared log that contradicts a handed-out checkpoint: %v", err)
	}
	t.Log(err)
}

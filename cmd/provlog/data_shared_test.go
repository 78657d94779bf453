package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestDataCommandsOnSharedLog: the data dir of a sidecar on a shared
// PostgreSQL log holds no log of its own. Commands given only --data say
// so, naming the shared log and --log, instead of
// reading an empty Pebble store; given the sidecar's config (store:) as
// well, audit, export and evidence read the shared log.
func TestDataCommandsOnSharedLog(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := &Config{Data: data, Actor: "local", Store: dsn}
	sc, err := openSidecar(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e := &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "local", Fields: map[string]any{
			"server": "shared", "tool": "t", "args": map[string]any{"i": i},
		}}
		b, _ := e.Marshal()
		if _, err := sc.seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	sc.close()
	cfgFile := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfgFile, []byte("data: "+data+"\nstore: "+dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCmd := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}

	for _, args := range [][]string{
		{"audit", "--data", data},
		{"prove", "--data", data, "--index", "1"},
		{"tasks", "--data", data},
		{"export", "--data", data, "--out", filepath.Join(dir, "bundle0")},
		{"evidence", "--data", data, "--index", "1", "--out", filepath.Join(dir, "ev0")},
	} {
		code, out := runCmd(args...)
		if code == 0 || !strings.Contains(out, "shared log in PostgreSQL") || !strings.Contains(out, "--log") {
			t.Errorf("%v: exit %d, want a refusal naming the shared log and --log:\n%s", args, code, out)
		}
	}

	code, out := runCmd("audit", "--data", data, "--config", cfgFile)
	if code != 0 || !strings.Contains(out, "shared log in PostgreSQL") || !strings.Contains(out, "OK") {
		t.Fatalf("audit --config with store:: exit %d:\n%s", code, out)
	}
	t.Log(out)
	if code, out := runCmd("export", "--data", data, "--config", cfgFile, "--out", filepath.Join(dir, "bundle")); code != 0 {
		t.Fatalf("export --config with store:: exit %d:\n%s", code, out)
	}
	if code, out := runCmd("verify-bundle", filepath.Join(dir, "bundle")); code != 0 {
		t.Fatalf("verify-bundle of the shared log's export: exit %d:\n%s", code, out)
	}
	if code, out := runCmd("evidence", "--data", data, "--config", cfgFile, "--index", "3", "--out", filepath.Join(dir, "ev")); code != 0 {
		t.Fatalf("evidence --config with store:: exit %d:\n%s", code, out)
	}
}

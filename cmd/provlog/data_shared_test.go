package main

// A sidecar on a shared PostgreSQL log: the data commands, blobs across
// sidecars, and a fork refused.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
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
	sc := mustOpenSidecar(t, cfg)
	for i := range 5 {
		b := callEntry("shared", "t", map[string]any{"i": i})
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

	// The read-only commands never write to the database: given a store:
	// that holds no log, they say so and create no tables.
	empty := pgtest.DSN(t)
	emptyCfg := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(emptyCfg, []byte("data: "+data+"\nstore: "+empty+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"audit", "--data", data, "--config", emptyCfg},
		{"export", "--data", data, "--config", emptyCfg, "--out", filepath.Join(dir, "bundle-empty")},
		{"evidence", "--data", data, "--config", emptyCfg, "--index", "1", "--out", filepath.Join(dir, "ev-empty")},
	} {
		code, out := runCmd(args...)
		if code == 0 || !strings.Contains(out, "no provlog log here") || !strings.Contains(out, "provlog_state") {
			t.Errorf("%v on a database without a log: exit %d, want a refusal naming the missing tables:\n%s", args[0], code, out)
		}
	}
	if n := strings.TrimSpace(pgtest.Psql(t, empty, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`)); n != "0" {
		t.Errorf("the read-only commands created %s tables in a database without a log", n)
	}
}

// TestBlobsAcrossSidecars: two sidecars of one shared log, each with its
// own data dir: a payload blob stored through A is read through B, and
// purged through B it is gone for A; a blob A kept in its data dir before
// the log's table held them is still read, and purged from there too.
func TestBlobsAcrossSidecars(t *testing.T) {
	dsn := pgtest.DSN(t)
	dataA, dataB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := mustOpenSidecar(t, &Config{Data: dataA, Actor: "local", Store: dsn})
	defer a.close()
	if err := os.MkdirAll(dataB, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{logKeyFile, logVKeyFile, anchorPubFile, anchorKeyFile} {
		copyDir(t, filepath.Join(dataA, f), filepath.Join(dataB, f))
	}
	b := mustOpenSidecar(t, &Config{Data: dataB, Actor: "local", Store: dsn})
	defer b.close()

	data := []byte(strings.Repeat("retained ", 500))
	sum, err := a.blobs.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.blobs.Get(sum); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("B reads A's blob: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataA, blobDir, sum[:2], sum)); err == nil {
		t.Error("the shared log's blob went to the data dir too")
	}
	if err := b.blobs.Purge(sum); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.blobs.Has(sum); ok || err != nil {
		t.Fatalf("a blob purged through B is still there for A: %v", err)
	}

	// From before: in A's data dir only.
	old, err := blobs.Open(filepath.Join(dataA, blobDir))
	if err != nil {
		t.Fatal(err)
	}
	osum, _ := old.Put([]byte("kept before"))
	if got, err := a.blobs.Get(osum); err != nil || string(got) != "kept before" {
		t.Fatalf("A reads its data dir's older blob: %v", err)
	}
	if err := a.blobs.Purge(osum); err != nil {
		t.Fatalf("purging the older blob: %v", err)
	}
	if ok, err := old.Has(osum); ok || err != nil {
		t.Fatalf("the older blob after its purge: %v %v", ok, err)
	}
}

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
		b := callEntry("fork", "t", map[string]any{"i": i})
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

// TestSharedLogLossRefused: a sidecar on a shared log records the newest
// checkpoint it showed (handed-out.0/1) before it shows it; started again on a store
// that no longer holds it (a failover that lost acknowledged commits,
// here a database that starts over), it refuses, naming the loss. It
// served on, and signed a second history under the same key.
func TestSharedLogLossRefused(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	cfg := &Config{Data: data, Actor: "local", Store: pgtest.DSN(t)}
	sc := mustOpenSidecar(t, cfg)
	for i := range 10 {
		if _, err := sc.seq.Append(ctx, callEntry("loss", "t", map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
	_, shown := sc.seq.Checkpoint()
	sc.close()
	if got, err := shownOut.read(data); err != nil || !bytes.Equal(got, shown) {
		t.Fatalf("the record of checkpoints shown holds %q (%v), want the last checkpoint shown", got, err)
	}
	// The same store: served on.
	mustOpenSidecar(t, cfg).close()
	// A store that lost it.
	lost := *cfg
	lost.Store = pgtest.DSN(t)
	_, err := openSidecar(ctx, &lost, quietLogger(), true)
	if err == nil || !strings.Contains(err.Error(), "acknowledged entries lost") || !strings.Contains(err.Error(), "handed-out.0") {
		t.Fatalf("serve on a shared log that lost what this data dir showed: %v", err)
	}
}

// TestOwnLogThenShared: a data dir whose own (Pebble) log handed out
// checkpoints is refused on a shared store that does not hold that log:
// the same key would sign two histories. It served a new log from
// genesis, and the two alternated as store: was set and unset.
func TestOwnLogThenShared(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	own := &Config{Data: data, Actor: "local"}
	sc := mustOpenSidecar(t, own)
	for i := range 3 {
		if _, err := sc.seq.Append(ctx, callEntry("own", "t", map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
	sc.close()
	shared := &Config{Data: data, Actor: "local", Store: pgtest.DSN(t)}
	_, err := openSidecar(ctx, shared, quietLogger(), true)
	if err == nil || !strings.Contains(err.Error(), "acknowledged entries lost") || !strings.Contains(err.Error(), "the data dir's own log") {
		t.Fatalf("a data dir with its own log on an empty shared store: %v", err)
	}
	// Its own log still serves.
	mustOpenSidecar(t, own).close()
}

// TestHealthSeesTheDatabase: /healthz of an idle sidecar on a shared log
// says storage_failed as soon as its database is unreachable, and ok once
// it is back; it said "ok" until a call happened to fail.
func TestHealthSeesTheDatabase(t *testing.T) {
	c := pgtest.NewCluster(t)
	sc := mustOpenSidecar(t, &Config{Data: filepath.Join(t.TempDir(), "data"), Actor: "local", Store: c.DSN})
	defer sc.close()
	storage := func() string {
		for _, p := range sc.problems() {
			if p.Reason == reasonStorage {
				return p.Detail
			}
		}
		return ""
	}
	if d := storage(); d != "" {
		t.Fatalf("a sound database: %s", d)
	}
	c.Stop("fast")
	waitFor(t, "health to see the database gone", func() bool { return strings.Contains(storage(), "unreachable") })
	c.Start()
	waitFor(t, "health to see the database back", func() bool { return storage() == "" })
}

// TestSharedDataDirHeld: a second sidecar given the data dir of one that
// runs on a shared log is refused, saying so, and starts once the first
// has stopped. Before, both ran, each writing over the other's record of
// the checkpoints handed out (and its task index and sidecar.json).
func TestSharedDataDirHeld(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := &Config{Data: filepath.Join(t.TempDir(), "data"), Actor: "local", Store: dsn}
	first := mustOpenSidecar(t, cfg)
	if _, err := openSidecar(context.Background(), cfg, quietLogger(), true); err == nil || !strings.Contains(err.Error(), "in use by another provlog sidecar") {
		t.Errorf("a second sidecar on the data dir: %v, want it refused", err)
	}
	first.close()
	mustOpenSidecar(t, cfg).close()
}

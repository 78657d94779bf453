package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReplayDataTamperedEntry: provlog replay --data reads its calls from
// the data dir, and an entry edited there (a call's arguments rewritten
// in place in the Pebble store, the tree and its signed checkpoint left
// alone) is not the one the log's tree holds. Replay must refuse the
// range, naming the entry, and record nothing; before, it re-ran the
// edited call as if the log held it (exit 0, the forged arguments sent
// to the server).
func TestReplayDataTamperedEntry(t *testing.T) {
	fx := newReplayFixture(t)
	dir := t.TempDir()
	data, cfgPath := filepath.Join(dir, "data"), filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf("data: %s\nservers:\n  - id: fx\n    url: %s\n    retain: full\n", data, fx.url))
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	first, _ := sc.seq.Checkpoint()
	for _, q := range []string{"tp53", "egfr"} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__stable", Arguments: map[string]any{"q": q}}); err != nil || res.IsError {
			t.Fatalf("fx__stable: %v %v", err, res)
		}
	}
	closeClient()
	sc.close()

	// The forger rewrites the first call's arguments where the entry
	// lies: key 'e' and its big-endian index.
	db, err := pebble.Open(filepath.Join(data, dbDir), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := binary.BigEndian.AppendUint64([]byte{'e'}, first)
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	forged := bytes.Replace(bytes.Clone(v), []byte(`"tp53"`), []byte(`"kras"`), 1)
	closer.Close()
	if bytes.Equal(forged, v) {
		t.Fatalf("entry %d holds no tp53: %s", first, v)
	}
	if err := db.Set(key, forged, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"replay", "--data", data, "--config", cfgPath, "--json",
		"--from", fmt.Sprint(first), "--to", fmt.Sprint(first + 4)}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), fmt.Sprintf("entry %d", first)) {
		t.Fatalf("replay of a data dir whose entry %d was edited exited %d, want a refusal naming it:\nstdout %s\nstderr %s", first, code, out.String(), errb.String())
	}
	if strings.Contains(out.String(), "kras") {
		t.Errorf("the forged arguments were replayed: %s", out.String())
	}
}

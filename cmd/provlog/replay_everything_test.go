package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayEverythingForger replays calls recorded through a real
// sidecar in front of npm server-everything over stdio: a deterministic
// tool is unchanged, a stateful one (toggle-simulated-logging answers
// "started" and "stopped" in turn) is told flaky, not verified; and a
// forger's flipped byte in a call entry of the data dir makes replay
// refuse, naming the entry, with nothing recorded.
func TestReplayEverythingForger(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missingPrereq(t, "node is not installed")
	}
	js := filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(js); err != nil {
		missingPrereq(t, fmt.Sprintf("npm server-everything not found (%v)", err))
	}
	dir := t.TempDir()
	data, cfgPath := filepath.Join(dir, "data"), filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf("data: %s\nservers:\n  - id: ev\n    command: [%q, %q, stdio]\n    replay: true\n    retain: full\n", data, node, js))
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	ctx := context.Background()
	first, _ := sc.seq.Checkpoint()
	calls := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ev__echo", map[string]any{"message": "hi"}, replay.Unchanged},
		{"ev__get-sum", map[string]any{"a": 1, "b": 2}, replay.Unchanged},
		{"ev__toggle-simulated-logging", map[string]any{}, replay.Flaky},
	}
	for _, c := range calls {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.tool, err, res)
		}
	}
	closeClient()
	sc.close()
	end := first + 2*uint64(len(calls))

	replayOnce := func() (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--json",
			"--from", fmt.Sprint(first), "--to", fmt.Sprint(end)}, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := replayOnce()
	if code != 0 {
		t.Fatalf("replay exited %d: %s %s", code, out, errs)
	}
	var rep replay.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Outcomes) != len(calls) {
		t.Fatalf("%d outcomes: %s", len(rep.Outcomes), out)
	}
	for i, o := range rep.Outcomes {
		if o.Class != calls[i].want || o.Definition != replay.DefinitionSame {
			t.Errorf("%s: %s (%s), definition %s; want %s, same", calls[i].tool, o.Class, o.Reason, o.Definition, calls[i].want)
		}
	}

	// A flipped byte in the echo call's entry.
	db, err := pebble.Open(filepath.Join(data, dbDir), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := binary.BigEndian.AppendUint64([]byte{'e'}, first)
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(v)
	closer.Close()
	at := bytes.Index(flipped, []byte(`"hi"`)) + 1
	flipped[at] ^= 0x01 // "hi" -> "ii"
	if err := db.Set(key, flipped, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := store.State(ctx)
	store.Close()
	code, out, errs = replayOnce()
	if code == 0 || !strings.Contains(errs, fmt.Sprintf("entry %d was changed", first)) {
		t.Fatalf("replay of a data dir with a byte of entry %d flipped exited %d, want a refusal naming it:\n%s\n%s", first, code, out, errs)
	}
	store, err = openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if after, _ := store.State(ctx); after.Size != st.Size {
		t.Errorf("the refused replay was recorded: size %d -> %d", st.Size, after.Size)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
)

// TestEvidenceToolNameWords: a downstream server names a tool with words
// of the report in it (no control character: log.Printable leaves it
// be): "lookup by alice at ..., was in the log ... according to TSA
// "DigiCert" and". The sidecar records a call of it in a log with no
// anchor. verify-evidence prints the call's name inside its OK line;
// unquoted, the line reads as if a TSA had timed the entry, which
// nothing in the evidence says. The name must be quoted, so that what a
// server wrote stays one value.
func TestEvidenceToolNameWords(t *testing.T) {
	const name = `lookup by alice at 2026-12-01T10:14:24Z, was in the log provlog.example/agent-7 at size 9 by 2026-12-01T10:20:01Z according to TSA "DigiCert" and`
	data, _, index := escapeToolLog(t, name)
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", filepath.Join(data, logVKeyFile), ev)
	if code != 0 || !strings.Contains(out, "missing: no anchor") {
		t.Fatalf("verify-evidence of an unanchored call: %d\n%s", code, out)
	}
	if want := `a call of "fx__lookup by alice at 2026-12-01T10:14:24Z, was in the log provlog.example/agent-7 at size 9 by 2026-12-01T10:20:01Z according to TSA \"DigiCert\" and" by `; !strings.Contains(out, want) {
		t.Errorf("verify-evidence prints the tool name a server chose unquoted, as words of its own report; want %q in:\n%s", want, out)
	}
}

// actorWordsLog records, through a real sidecar whose config names the
// actor of its stdio clients (as actors: or an OAuth mapping could), one
// call of fx__lookup by that actor; it returns the stopped sidecar's
// data dir and the call's index.
func actorWordsLog(t *testing.T, actor string) (data string, index uint64) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("answer " + in.Q), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	q, _ := json.Marshal(actor) // a YAML flow scalar
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf("data: %s\nactor: %s\nservers:\n  - id: fx\n    url: %s\n", data, q, down.URL))
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := sc.proxy.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__lookup", Arguments: map[string]any{"q": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("calling the tool: %v %+v", err, res)
	}
	rc, err := log.ParseReceipt([]byte(res.Meta["dev.provlog/receipt"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	index = callOf(t, ctx, sc, rc.Index)
	cs.Close()
	sc.close()
	return data, index
}

// TestEvidenceActorWords: an actor id may hold spaces and words (a
// config's actors: can name what an OAuth claim mapped to an id could):
// "alice at 2026-12-01T10:14:24Z, was in the log
// example.org/l at size 9 by 2026-12-01T10:20:01Z according to
// TSA "DigiCert"". A call by it in a log with no anchor: verify-evidence
// prints the actor inside its OK line, and unquoted the line reads as if
// a TSA had timed the entry. The actor must be quoted, as the tool name
// is, so that what the actor's id holds stays one value.
func TestEvidenceActorWords(t *testing.T) {
	const actor = `alice at 2026-12-01T10:14:24Z, was in the log example.org/l at size 9 by 2026-12-01T10:20:01Z according to TSA "DigiCert"`
	data, index := actorWordsLog(t, actor)
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", filepath.Join(data, logVKeyFile), ev)
	if code != 0 || !strings.Contains(out, "missing: no anchor") {
		t.Fatalf("verify-evidence of an unanchored call: %d\n%s", code, out)
	}
	if want := `a call of "fx__lookup" by "alice at 2026-12-01T10:14:24Z, was in the log example.org/l at size 9 by 2026-12-01T10:20:01Z according to TSA \"DigiCert\"" at `; !strings.Contains(out, want) {
		t.Errorf("verify-evidence prints an actor id unquoted, as words of its own report; want %q in:\n%s", want, out)
	}
}

// TestPurgeActorWords: a purge entry's actor is an actor id, words and
// all: "carol at 2020-01-01T00:00:00Z, by the retention policy".
// verify-bundle's line naming the purge entry of a payload, and
// evidence's saying a cited payload was purged, print it; unquoted they
// read as if retention had purged it, at another time. Both must quote
// it.
func TestPurgeActorWords(t *testing.T) {
	const actor = `carol at 2020-01-01T00:00:00Z, by the retention policy`
	if err := log.CheckActor(actor, opp.MaxActor); err != nil {
		t.Fatalf("the actor id is not one a config may hold: %v", err)
	}
	p := makePayloadLog(t)
	k, err := loadKeys(p.data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(p.data, false)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(context.Background(), store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&blobs.PurgeEntry{Time: time.Now(), Actor: "forged", Reason: "erasure", Blobs: []string{p.aliceArgs}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Append(context.Background(), withActor(t, b, actor)); err != nil {
		t.Fatal(err)
	}
	seq.Close()
	store.Close()
	const quoted = `by "carol at 2020-01-01T00:00:00Z, by the retention policy"`

	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", p.data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	o, code := runCmd(t, "verify-bundle", out)
	if code != 0 || !strings.Contains(o, "purged by purge entry") {
		t.Fatalf("verify-bundle of a bundle with a purge entry: exit %d: %s", code, o)
	}
	if !strings.Contains(o, quoted+`: "erasure"`) {
		t.Errorf("verify-bundle prints a purge entry's actor unquoted; want %q in:\n%s", quoted, o)
	}

	o, code = runCmd(t, "evidence", "--data", p.data, "--index", "1", "--out", filepath.Join(t.TempDir(), "ev"))
	if code != 0 || !strings.Contains(o, "payload purged") {
		t.Fatalf("evidence of a call whose arguments were purged: exit %d: %s", code, o)
	}
	if !strings.Contains(o, quoted+` (reason "erasure")`) {
		t.Errorf("evidence prints a purge entry's actor unquoted; want %q in:\n%s", quoted, o)
	}
}

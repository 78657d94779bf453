package main

// Retention on a shared PostgreSQL log, with calls through another
// sidecar of the log under way.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// gatedPrompt is an MCP server over HTTP whose prompt "p" (argument "a")
// answers at once, or, once armed, says it has the request (entered) and
// answers only when gate is closed.
type gatedPrompt struct {
	url     string
	armed   chan struct{} // closed: the next gets wait
	entered chan struct{}
	gate    chan struct{}
}

func newGatedPrompt(t *testing.T) *gatedPrompt {
	t.Helper()
	g := &gatedPrompt{armed: make(chan struct{}), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "gated", Version: "1"}, nil)
	srv.AddPrompt(&mcp.Prompt{Name: "p", Arguments: []*mcp.PromptArgument{{Name: "a"}}}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		select {
		case <-g.armed:
			g.entered <- struct{}{}
			<-g.gate
		default:
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprint(len(req.Params.Arguments["a"]))}}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	g.url = ts.URL
	return g
}

// sharedPair opens two sidecars, A and B, on one shared PostgreSQL log
// (B's data dir holding A's keys), both with server fx at url.
func sharedPair(t *testing.T, url string) (a, b *sidecar) {
	t.Helper()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	conf := func(name string) *Config {
		data := filepath.Join(dir, name)
		return loadConfigText(t, filepath.Join(dir, name+".yaml"), fmt.Sprintf("data: %s\nstore: %s\nservers:\n  - id: fx\n    url: %s\n", data, dsn, url))
	}
	a = mustOpenSidecar(t, conf("a"))
	t.Cleanup(a.close)
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{logKeyFile, logVKeyFile, anchorPubFile, anchorKeyFile} {
		copyDir(t, filepath.Join(dir, "a", f), filepath.Join(dir, "b", f))
	}
	b = mustOpenSidecar(t, conf("b"))
	t.Cleanup(b.close)
	return a, b
}

// TestRetentionSharedKeepsCallUnderWay: on a shared log, retention run
// by sidecar A does not leave a payload missing that a read through
// sidecar B names: B's prompts/get, whose arguments (too large for an
// entry) are the blob an old read's entry names, found the blob there and
// is waiting for the server while A's retention, older than the cut,
// purges it. B's entry, written after the purge entry, names the blob:
// the blob must be in the store (audit holds an entry newer than every
// purge entry naming its blob to that). Before, it was gone: B's hold on
// the blob is in B's process only, which A's purge cannot see.
func TestRetentionSharedKeepsCallUnderWay(t *testing.T) {
	g := newGatedPrompt(t)
	a, b := sharedPair(t, g.url)
	ctx := context.Background()
	csA, closeA := memClient(t, a, "via-a")
	defer closeA()
	csB, closeB := memClient(t, b, "via-b")
	defer closeB()
	get := &mcp.GetPromptParams{Name: "fx__p", Arguments: map[string]string{"a": strings.Repeat("large arguments ", 6000)}}
	if _, err := csA.GetPrompt(ctx, get); err != nil {
		t.Fatalf("the old read: %v", err)
	}
	st, err := a.store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := sidecarEntry(t, a, st.Size-1).Fields["args_sha256"].(string)
	if ok, _ := a.blobs.Has(blob); blob == "" || !ok {
		t.Fatalf("the old read kept its arguments in no blob")
	}
	cut := time.Now()
	for !time.Now().After(cut) {
		time.Sleep(time.Millisecond)
	}

	close(g.armed)
	done := make(chan error, 1)
	go func() { _, err := csB.GetPrompt(ctx, get); done <- err }()
	<-g.entered // B holds the blob, found there, and waits for the server
	res, err := purge(ctx, a.seq, a.store, a.blobs, &ageIndex{}, purgeActor, purgeRequest{
		Before: cut.UTC().Format(time.RFC3339Nano), Reason: "retention: test"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Blobs, blob) || len(res.Entries) != 1 {
		t.Fatalf("retention purged %v (entries %v), want the old read's arguments %s", res.Blobs, res.Entries, blob[:12])
	}
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatalf("the read through B: %v", err)
	}
	st, err = b.store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := sidecarEntry(t, b, st.Size-1)
	if e.Kind != log.KindPromptGet || e.Fields["args_sha256"] != blob || st.Size-1 <= res.Entries[0] {
		t.Fatalf("entry %d: %s %v, want B's prompts/get naming %s after purge entry %d", st.Size-1, e.Kind, e.Fields, blob[:12], res.Entries[0])
	}
	for name, sc := range map[string]*sidecar{"A": a, "B": b} {
		if ok, err := sc.blobs.Has(blob); !ok || err != nil {
			t.Errorf("through %s: blob %s, which B's entry %d (after purge entry %d) names, is gone (%v)", name, blob[:12], st.Size-1, res.Entries[0], err)
		}
	}
}

// TestRetentionSharedRestoresNamed: the purge's side of
// TestRetentionSharedKeepsCallUnderWay. On a shared log, sidecar B
// commits an entry naming a blob after A's retention wrote its purge
// entry, and before A deletes the blob (B's own check, when its entry was
// in, found the blob there): A, having deleted, reads the entries since
// its purge entry and stores the blob again. Without that, the blob B's
// entry names, newer than every purge entry naming it, was gone.
func TestRetentionSharedRestoresNamed(t *testing.T) {
	for _, budget := range []int{restoreBudget, 1} {
		t.Run(fmt.Sprintf("budget %d", budget), func(t *testing.T) {
			// With a budget of one byte, the purge looks for entries
			// naming each blob right after deleting it, holding none.
			defer func(b int) { restoreBudget = b }(restoreBudget)
			restoreBudget = budget
			retentionRestoresNamed(t)
		})
	}
}

func retentionRestoresNamed(t *testing.T) {
	a, b := sharedPair(t, newGatedPrompt(t).url)
	ctx := context.Background()
	payload := []byte(strings.Repeat("an old call's arguments ", 100))
	blob, err := a.blobs.Put(payload)
	if err != nil {
		t.Fatal(err)
	}
	named := func(at time.Time) []byte {
		e, _ := (&log.Entry{Kind: log.KindCall, Time: at, Actor: "alice", Fields: map[string]any{
			"server": "s", "tool": "t", "args_sha256": blob, "started": at.Format(log.TimeFormat)}}).Marshal()
		return e
	}
	if _, err := a.seq.Append(ctx, named(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	var late uint64
	hooked := blobs.New(&afterDeletes{Store: a.blobs, n: 1, hook: func() {
		rc, err := b.seq.Append(ctx, named(time.Now()))
		if err != nil {
			t.Error(err)
			return
		}
		late = rc.Index
	}})
	res, err := purge(ctx, a.seq, a.store, hooked, &ageIndex{}, purgeActor, purgeRequest{
		Before: time.Now().UTC().Format(time.RFC3339Nano), Reason: "retention: test"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Blobs, blob) || len(res.Entries) != 1 || late <= res.Entries[0] {
		t.Fatalf("retention purged %v (entries %v), B's entry is %d: want the blob purged, then named after the purge entry", res.Blobs, res.Entries, late)
	}
	if ok, err := b.blobs.Has(blob); !ok || err != nil {
		t.Errorf("blob %s, which B's entry %d (after purge entry %d) names, is gone (%v)", blob[:12], late, res.Entries[0], err)
	}
}

// TestSharedPurgeRestoresNotErased: the purge's restore (deleteBlobs)
// stores again a blob an entry after its purge entry names, unless a
// later purge entry names it too. Sidecar A's retention deletes blob X
// (purge entry j); before A looks at the entries since j, B commits a
// call naming X, and then an erasure through B records X (purge entry
// k). X must stay gone: k is newer than every entry naming it. A's
// restore stored it again, and audit said the erasure did not finish.
func TestSharedPurgeRestoresNotErased(t *testing.T) {
	a, b := sharedPair(t, newGatedPrompt(t).url)
	ctx := context.Background()
	payload := []byte(strings.Repeat("an erased payload ", 100))
	blob, err := a.blobs.Put(payload)
	if err != nil {
		t.Fatal(err)
	}
	call := func(at time.Time) []byte {
		e, _ := (&log.Entry{Kind: log.KindCall, Time: at, Actor: "alice", Fields: map[string]any{
			"server": "s", "tool": "t", "args_sha256": blob, "started": at.Format(log.TimeFormat)}}).Marshal()
		return e
	}
	if _, err := a.seq.Append(ctx, call(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	var erased uint64
	hooked := blobs.New(&afterDeletes{Store: a.blobs, n: 1, hook: func() {
		if _, err := b.seq.Append(ctx, call(time.Now())); err != nil {
			t.Error(err)
			return
		}
		pe, err := (&blobs.PurgeEntry{Time: time.Now(), Actor: "op", Reason: "erasure request", Criteria: blobs.PurgeCriteria{Blobs: []string{blob}}, Blobs: []string{blob}}).Marshal()
		if err != nil {
			t.Error(err)
			return
		}
		rc, err := b.seq.Append(ctx, pe)
		if err != nil {
			t.Error(err)
			return
		}
		erased = uint64(rc.Index)
	}})
	res, err := purge(ctx, a.seq, a.store, hooked, &ageIndex{}, purgeActor, purgeRequest{
		Before: time.Now().UTC().Format(time.RFC3339Nano), Reason: "retention: test"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Blobs, blob) || erased <= res.Entries[0] {
		t.Fatalf("retention purged %v (entries %v), the erasure is entry %d", res.Blobs, res.Entries, erased)
	}
	if ok, err := b.blobs.Has(blob); ok || err != nil {
		t.Errorf("blob %s, erased by purge entry %d after every entry naming it, is in the store (%v)", blob[:12], erased, err)
	}
}

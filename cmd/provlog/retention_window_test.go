package main

// Retention's last look at the log and its purge entry: a call naming a
// blob the purge is about to delete lands in between.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// lookHook is a log's store whose next look at its newest state (State,
// or Latest on a shared log: what retention's last look before its purge
// entry reads) runs hook once, right after the store answered: what hook
// commits lands after the look, before the purge entry.
type lookHook struct {
	log.SharedStorage
	once sync.Once
	hook func()
}

func (s *lookHook) Latest(ctx context.Context) (log.State, error) {
	st, err := s.SharedStorage.Latest(ctx)
	s.once.Do(s.hook)
	return st, err
}

// windowReads are three reads whose arguments (each too large for an
// entry) go to three blobs.
func windowReads() []*mcp.GetPromptParams {
	var out []*mcp.GetPromptParams
	for i := range 3 {
		out = append(out, &mcp.GetPromptParams{Name: "fx__p", Arguments: map[string]string{"a": strings.Repeat(fmt.Sprintf("large arguments %d ", i), 6000)}})
	}
	return out
}

// readBlobs makes the reads through cs and returns the blobs their
// entries name.
func readBlobs(t *testing.T, sc *sidecar, cs *mcp.ClientSession, gets []*mcp.GetPromptParams) []string {
	t.Helper()
	var out []string
	for _, g := range gets {
		if _, err := cs.GetPrompt(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		st, err := sc.store.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		blob, _ := sidecarEntry(t, sc, st.Size-1).Fields["args_sha256"].(string)
		if blob == "" {
			t.Fatalf("read %d kept its arguments in no blob", len(out))
		}
		out = append(out, blob)
	}
	return out
}

// pastCut returns a cut every entry so far is older than.
func pastCut() time.Time {
	cut := time.Now()
	for !time.Now().After(cut) {
		time.Sleep(time.Millisecond)
	}
	return cut
}

// TestRetentionKeepsNamedInWindow: on a shared PostgreSQL log, sidecar
// A's retention reads the entries committed since its plan (its last
// look), and sidecar B's reads, newer than the cut, name the three blobs
// the purge is about to delete, committed after that look and before A's
// purge entry (the store's answer to the look is hooked to make B's calls
// then). B's calls found the blobs there, and their entries are before the
// purge entry: neither B's check nor A's restore stores them again. The
// blobs entries newer than the cut name must stay; they were deleted, 3
// of 3, and audit counted them purged.
func TestRetentionKeepsNamedInWindow(t *testing.T) {
	a, b := sharedPair(t, newGatedPrompt(t).url)
	ctx := context.Background()
	csA, closeA := memClient(t, a, "via-a")
	defer closeA()
	csB, closeB := memClient(t, b, "via-b")
	defer closeB()
	gets := windowReads()
	named := readBlobs(t, a, csA, gets)
	cut := pastCut()
	var late []uint64
	store := &lookHook{SharedStorage: a.store.(log.SharedStorage), hook: func() {
		for _, g := range gets {
			if _, err := csB.GetPrompt(ctx, g); err != nil {
				t.Error(err)
				return
			}
			st, err := b.store.State(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			late = append(late, st.Size-1)
		}
	}}
	ages := &ageIndex{}
	res, err := purge(ctx, a.seq, store, a.blobs, ages, purgeActor, purgeRequest{
		Before: cut.UTC().Format(time.RFC3339Nano), Reason: "retention: test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(late) != len(gets) || len(res.Entries) != 1 || late[len(late)-1] >= res.Entries[0] {
		t.Fatalf("B's reads are entries %v, the purge entries %v: want B's reads before the purge entry", late, res.Entries)
	}
	lost := 0
	for i, blob := range named {
		if ok, err := b.blobs.Has(blob); !ok || err != nil {
			lost++
			t.Errorf("blob %s, which B's read %d (newer than the cut) names, is gone (%v)", blob[:12], late[i], err)
		}
	}
	if lost > 0 {
		t.Errorf("payloads lost: %d of %d", lost, len(named))
	}
	if slices.ContainsFunc(res.Blobs, func(s string) bool { return slices.Contains(named, s) }) || res.Kept != len(named) {
		t.Errorf("the purge says it purged %d blobs and kept %d, want the %d that B's reads name kept", len(res.Blobs), res.Kept, len(named))
	}
	auditPayloadsClean(t, a)
	if t.Failed() {
		return
	}

	// Once B's reads are older than the cut too, retention purges the
	// blobs with a purge entry of its own.
	again, err := purge(ctx, a.seq, a.store, a.blobs, ages, purgeActor, purgeRequest{
		Before: pastCut().UTC().Format(time.RFC3339Nano), Reason: "retention: test"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Blobs, slices.Sorted(slices.Values(named))) || len(again.Entries) != 1 || again.Kept != 0 {
		t.Errorf("the next retention purged %d blobs (entries %v, kept %d), want the %d B's reads named", len(again.Blobs), again.Entries, again.Kept, len(named))
	}
	for _, blob := range named {
		if ok, err := b.blobs.Has(blob); ok || err != nil {
			t.Errorf("blob %s, purged by the next retention, is there (%v)", blob[:12], err)
		}
	}
	auditPayloadsClean(t, a)
}

// TestRetentionKeepsNamedOneSidecar: the same window on a log of one
// sidecar (Pebble). The purge has doomed the blobs before its last look,
// so the reads made then wait for their hold until the purge is done,
// find the blobs gone and write them anew: none is lost.
func TestRetentionKeepsNamedOneSidecar(t *testing.T) {
	dir := t.TempDir()
	a := mustOpenSidecar(t, loadConfigText(t, filepath.Join(dir, "a.yaml"), fmt.Sprintf("data: %s\nservers:\n  - id: fx\n    url: %s\n", filepath.Join(dir, "a"), newGatedPrompt(t).url)))
	t.Cleanup(a.close)
	ctx := context.Background()
	cs, closeCS := memClient(t, a, "via-a")
	defer closeCS()
	gets := windowReads()
	named := readBlobs(t, a, cs, gets)
	cut := pastCut()
	done := make(chan error, len(gets))
	store := &stateHook{Storage: a.store, hook: func() {
		for _, g := range gets {
			go func() { _, err := cs.GetPrompt(ctx, g); done <- err }()
		}
	}}
	if _, err := purge(ctx, a.seq, store, a.blobs, &ageIndex{}, purgeActor, purgeRequest{
		Before: cut.UTC().Format(time.RFC3339Nano), Reason: "retention: test"}); err != nil {
		t.Fatal(err)
	}
	for range gets {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, blob := range named {
		if ok, err := a.blobs.Has(blob); !ok || err != nil {
			t.Errorf("blob %s, which a read newer than the cut names, is gone (%v)", blob[:12], err)
		}
	}
	auditPayloadsClean(t, a)
}

// stateHook is lookHook for a log of one writer (State).
type stateHook struct {
	log.Storage
	once sync.Once
	hook func()
}

func (s *stateHook) State(ctx context.Context) (log.State, error) {
	st, err := s.Storage.State(ctx)
	s.once.Do(s.hook)
	return st, err
}

// auditPayloadsClean holds sc's log and blobs to what audit says of
// payloads: none missing, changed, unreadable or unfinished.
func auditPayloadsClean(t *testing.T, sc *sidecar) {
	t.Helper()
	ctx := context.Background()
	st, err := sc.store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sh, ok := sc.store.(log.SharedStorage); ok {
		if st, err = sh.Latest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var pr payloadRefs
	es, err := sc.store.Entries(ctx, 0, st.Size)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range es {
		e, _ := log.ParseEntry(b)
		pr.add(uint64(i), e)
	}
	rep := pr.check(sc.blobs)
	if len(rep.Missing)+len(rep.Corrupt)+len(rep.Unreadable)+len(rep.Unfinished) > 0 {
		t.Errorf("audit: missing %v, changed %v, unreadable %v, unfinished %v", rep.Missing, rep.Corrupt, rep.Unreadable, rep.Unfinished)
	}
}

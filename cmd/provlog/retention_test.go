package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// countingEntries is an entry list that counts the entries read from it.
type countingEntries struct {
	entryList
	read int
}

func (c *countingEntries) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	c.read += int(end - start)
	return c.entryList.Entries(ctx, start, end)
}

// TestAgeIndex: a purge by age judges a blob by the newest entry naming
// it, and each purge reads only the entries appended since the last one.
func TestAgeIndex(t *testing.T) {
	ctx := context.Background()
	bs, _ := blobs.Open(t.TempDir())
	old, _ := bs.Put([]byte("old"))
	shared, _ := bs.Put([]byte("shared"))
	erased, _ := bs.Put([]byte("erased"))
	fresh, _ := bs.Put([]byte("fresh"))
	day := 24 * time.Hour
	now := time.Now()
	src := &countingEntries{}
	add := func(at time.Time, blob string) {
		b, err := (&log.Entry{Kind: log.KindCall, Time: at, Actor: "x", Fields: map[string]any{"args_sha256": blob}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		src.entryList = append(src.entryList, b)
	}
	add(now.Add(-10*day), old)
	add(now.Add(-10*day), shared)
	add(now.Add(-9*day), erased)
	add(now.Add(-1*day), shared) // a newer entry names it: kept
	add(now, fresh)

	var x ageIndex
	cut := now.Add(-2 * day)
	got, kept, err := x.pick(ctx, src, uint64(len(src.entryList)), cut, bs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{old, erased}
	slices.Sort(want)
	if !slices.Equal(got, want) || kept != 1 {
		t.Fatalf("picked %v, kept %d; want %v, kept 1", got, kept, want)
	}
	if src.read != 5 {
		t.Fatalf("read %d entries, want 5", src.read)
	}

	// The old one is purged; the erased one goes by an erasure, outside
	// the index. Two entries later, a purge reads just those two.
	bs.Purge(old)
	x.forget([]string{old})
	bs.Purge(erased)
	add(now, old) // named again, anew: the blob is gone, nothing to purge
	add(now.Add(-5*day), fresh)
	got, kept, err = x.pick(ctx, src, uint64(len(src.entryList)), cut, bs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || kept != 2 {
		t.Errorf("second pick %v, kept %d; want none, kept 2 (shared, and fresh now named 5 days ago too)", got, kept)
	}
	if src.read != 7 {
		t.Errorf("read %d entries in all, want 7: the second purge reread the log", src.read)
	}
	// As time passes the shared blob's newest entry ages out too.
	got, _, _ = x.pick(ctx, src, uint64(len(src.entryList)), now.Add(time.Hour), bs)
	if want := []string{fresh, shared}; !slices.Equal(got, sorted(want)) {
		t.Errorf("a later cut picks %v, want %v", got, sorted(want))
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

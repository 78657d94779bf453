package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
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
	got, _, kept, err := x.pick(ctx, src, uint64(len(src.entryList)), cut, bs)
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

	// The old one is purged, and the erased one by an erasure: their
	// purge entry forgets them. Three entries later, a purge reads just
	// those three.
	pb, err := (&blobs.PurgeEntry{Time: now, Actor: "x", Reason: "r", Blobs: sorted([]string{old, erased})}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	src.entryList = append(src.entryList, pb)
	bs.Purge(old)
	bs.Purge(erased)
	add(now, old) // named again, anew: the blob is gone, nothing to purge
	add(now.Add(-5*day), fresh)
	got, _, kept, err = x.pick(ctx, src, uint64(len(src.entryList)), cut, bs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || kept != 2 {
		t.Errorf("second pick %v, kept %d; want none, kept 2 (shared, and fresh now named 5 days ago too)", got, kept)
	}
	if src.read != 8 {
		t.Errorf("read %d entries in all, want 8: the second purge reread the log", src.read)
	}
	// As time passes the shared blob's newest entry ages out too.
	got, _, _, _ = x.pick(ctx, src, uint64(len(src.entryList)), now.Add(time.Hour), bs)
	if want := []string{fresh, shared}; !slices.Equal(got, sorted(want)) {
		t.Errorf("a later cut picks %v, want %v", got, sorted(want))
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// TestAgeIndexRestart: a saved index, loaded again, reads on from where
// it ended (the one entry it checks, then the new ones) and judges as an
// index built from the whole log does; a damaged file, a file of another
// log and one longer than the log are refused, saying so, and leave the
// index empty.
func TestAgeIndexRestart(t *testing.T) {
	ctx := context.Background()
	bs, _ := blobs.Open(t.TempDir())
	now := time.Now()
	src := &countingEntries{}
	add := func(at time.Time, data string) string {
		h, _ := bs.Put([]byte(data))
		b, err := (&log.Entry{Kind: log.KindCall, Time: at, Actor: "x", Fields: map[string]any{"args_sha256": h}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		src.entryList = append(src.entryList, b)
		return h
	}
	day := 24 * time.Hour
	add(now.Add(-10*day), "a")
	shared := add(now.Add(-10*day), "shared")
	add(now, "b")
	var x ageIndex
	cut := now.Add(-2 * day)
	if _, _, _, err := x.pick(ctx, src, uint64(len(src.entryList)), cut, bs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), retentionIndexFile)
	if err := x.save(ctx, path, src); err != nil {
		t.Fatal(err)
	}

	// The restart: two more entries, one naming the shared blob anew.
	add(now, "shared")
	old := add(now.Add(-5*day), "c")
	size := uint64(len(src.entryList))
	src.read = 0
	var y ageIndex
	if err := y.load(ctx, path, src, size); err != nil {
		t.Fatal(err)
	}
	got, _, kept, err := y.pick(ctx, src, size, cut, bs)
	if err != nil {
		t.Fatal(err)
	}
	if src.read != 1+2 {
		t.Errorf("the restarted index read %d entries, want 3 (its last one, checked, and the 2 new)", src.read)
	}
	var z ageIndex
	want, _, wantKept, _ := z.pick(ctx, src, size, cut, bs)
	if !slices.Equal(got, want) || kept != wantKept || !slices.Contains(got, old) || slices.Contains(got, shared) {
		t.Errorf("after the restart: picked %v, kept %d; an index of the whole log picks %v, kept %d", got, kept, want, wantKept)
	}

	good, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name string
		file []byte
		src  *countingEntries
		size uint64
		want string
	}{
		{"damaged", flipByte(good, len(ageIndexMagic)+50), src, size, "checksum does not match"},
		{"cut short", good[:len(good)-1], src, size, "checksum does not match"},
		{"another log", good, &countingEntries{entryList: entryList{[]byte("x"), []byte("y"), []byte("z")}}, 3, "made from another log"},
		{"longer than the log", good, src, 2, "covers 3 entries, but the log holds 2"},
		{"not one", []byte("hello"), src, size, "not a retention index"},
	} {
		os.WriteFile(path, tc.file, 0o600)
		var w ageIndex
		if err := w.load(ctx, path, tc.src, tc.size); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if w.next != 0 || w.ages != nil {
			t.Errorf("%s: the refused index was kept (%d entries)", tc.name, w.next)
		}
	}
}

func flipByte(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x40
	return b
}

// FuzzParseAgeIndex: any bytes parse or are refused, without a panic; what
// parses marshals back to the same bytes.
func FuzzParseAgeIndex(f *testing.F) {
	for _, a := range []blobAge{{1, 2, false}, {purged: true}} {
		x := &ageIndex{next: 3, ages: map[string]blobAge{strings.Repeat("ab", 32): a}}
		b, _ := x.marshal(make([]byte, 32))
		f.Add(b)
	}
	f.Add([]byte(ageIndexMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		y, leaf, err := parseAgeIndex(b)
		if err != nil {
			return
		}
		if len(y.ages) > 1 {
			return // map order: marshal's bytes differ, not its meaning
		}
		again, err := y.marshal(leaf)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("parsed %x, marshals to %x (%v)", b, again, err)
		}
	})
}

// TestRetentionIndexRestart: a sidecar with retention saves its age index
// in the data dir when it stops; started again, it loads it (the file
// names the log's own entry at its end) and goes on: an old payload
// appended while it was stopped is purged, and a blob a newer entry
// named before the restart is kept.
func TestRetentionIndexRestart(t *testing.T) {
	ctx := context.Background()
	p := makePayloadLog(t)
	cfg := filepath.Join(t.TempDir(), "provlog.yaml")
	os.WriteFile(cfg, []byte("data: "+p.data+"\nretention: {max_age: 48h, interval: 50ms}\n"), 0o600)
	_, stop := startServe(t, "--config", cfg)
	waitFor(t, "retention purged alice's old blobs", func() bool { return !blobExists(p.data, p.aliceArgs) })
	stop()

	indexAt := func() *ageIndex {
		t.Helper()
		s, err := openStore(p.data, true)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, _ := s.State(ctx)
		var x ageIndex
		if err := x.load(ctx, filepath.Join(p.data, retentionIndexFile), s, st.Size); err != nil || x.next == 0 {
			t.Fatalf("the saved index: %v (%d entries)", err, x.next)
		}
		return &x
	}
	first := indexAt()
	if _, ok := first.ages[p.shared]; !ok {
		t.Fatalf("the saved index does not hold the shared blob: %v", first.ages)
	}

	// While it is stopped, an old call with a payload of its own.
	k, _ := loadKeys(p.data)
	store, err := openStore(p.data, false)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := blobs.Open(filepath.Join(p.data, blobDir))
	dave, _ := bs.Put([]byte(`{"q":"dave"}`))
	at := time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)
	appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: at, Actor: "dave", Fields: map[string]any{
		"server": "s", "tool": "t", "args_sha256": dave, "started": at.Format(log.TimeFormat)}})
	seq.Close()
	store.Close()

	_, stop = startServe(t, "--config", cfg)
	waitFor(t, "retention purged dave's old blob", func() bool { return !blobExists(p.data, dave) })
	if !blobExists(p.data, p.shared) {
		t.Fatal("after the restart retention deleted a blob a newer entry names")
	}
	stop()
	if again := indexAt(); again.next <= first.next {
		t.Errorf("the index saved after the restart covers %d entries, before it %d", again.next, first.next)
	}
}

package logpebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// leafIndexOf is LeafIndex of entry e's leaf hash.
func leafIndexOf(t *testing.T, s *Store, e []byte) (uint64, error) {
	t.Helper()
	return s.LeafIndex(context.Background(), rfc6962.DefaultHasher.HashLeaf(e))
}

// wantLeafIndex fails t unless LeafIndex finds e at want.
func wantLeafIndex(t *testing.T, s *Store, e []byte, want uint64) {
	t.Helper()
	got, err := leafIndexOf(t, s, e)
	if err != nil || got != want {
		t.Fatalf("LeafIndex(%q) = %d, %v; want %d", e, got, err, want)
	}
}

// smallChunks are chunks of 16 entries, so that a test makes many.
func smallChunks() *Options { return &Options{testingOnlyChunkBits: 4} }

// chunkKeys returns the indices under 'j' in key order, checking that each
// key is in its chunk of 2^bits entries.
func chunkKeys(t *testing.T, r reader, bits uint) []uint64 {
	t.Helper()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{kindChunk}, UpperBound: []byte{kindChunk + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var idx []uint64
	var last []byte
	for ok := it.First(); ok; ok = it.Next() {
		i, err := leafKeyIndex(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if c := leafKeyEpoch(it.Key()); c != i>>bits {
			t.Fatalf("key of entry %d is in chunk %d", i, c)
		}
		if bytes.Compare(it.Key(), last) <= 0 {
			t.Fatal("keys out of order")
		}
		last = bytes.Clone(it.Key())
		idx = append(idx, i)
	}
	return idx
}

// TestLeafIndexChunks appends entries over many chunks of the leaf-hash
// index, in batches that end inside a chunk and batches that complete
// several, some entries twice, and finds each first index: in a complete
// chunk, in the open one, and not at all; then again after reopening
// with another chunk size configured. Only complete chunks have keys, each
// entry's in its chunk.
func TestLeafIndexChunks(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, smallChunks())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	a := newAppender()
	entry := func(i int) []byte { return fmt.Appendf(nil, "entry %d", i) }
	// Entry 5 comes again at 20 and 101, entry 40 at 103 (both in the
	// open chunk at the end), entry 99 at 100 (both in the open chunk).
	again := map[int]int{20: 5, 101: 5, 103: 40, 100: 99}
	sizes := []int{1, 7, 3, 5, 40, 1, 16, 27, 4}
	total := 0
	for _, n := range sizes {
		var es [][]byte
		for i := total; i < total+n; i++ {
			if j, ok := again[i]; ok {
				es = append(es, entry(j))
			} else {
				es = append(es, entry(i))
			}
		}
		total += n
		if err := s.Commit(context.Background(), a.batch(es)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store) {
		t.Helper()
		for i := range total {
			if _, ok := again[i]; ok {
				if _, err := leafIndexOf(t, s, entry(i)); !errors.Is(err, log.ErrNotFound) {
					t.Errorf("LeafIndex of entry %d, which was never appended: err = %v, want ErrNotFound", i, err)
				}
				continue
			}
			wantLeafIndex(t, s, entry(i), uint64(i))
		}
		at := func(i int) []byte {
			if j, ok := again[i]; ok {
				return entry(j)
			}
			return entry(i)
		}
		for i := range total {
			lh := rfc6962.DefaultHasher.HashLeaf(at(i))
			if ok, err := s.HasLeaf(context.Background(), lh, uint64(i)); !ok || err != nil {
				t.Errorf("HasLeaf(entry at %d) = %v, %v", i, ok, err)
			}
			if bytes.Equal(at(i), at(i+1)) {
				continue
			}
			if ok, err := s.HasLeaf(context.Background(), lh, uint64(i+1)); ok || err != nil {
				t.Errorf("HasLeaf(entry at %d, at %d) = %v, %v; want false", i, i+1, ok, err)
			}
		}
		if _, err := leafIndexOf(t, s, entry(total)); !errors.Is(err, log.ErrNotFound) {
			t.Errorf("LeafIndex of an entry past the end: err = %v, want ErrNotFound", err)
		}
		idx := chunkKeys(t, s.r, 4)
		if want := total &^ 15; len(idx) != want {
			t.Fatalf("%d keys under 'j', want %d (the complete chunks' entries)", len(idx), want)
		}
		slices.Sort(idx)
		for i, x := range idx {
			if x != uint64(i) {
				t.Fatalf("keys under 'j': index %d where %d was due", x, i)
			}
		}
		if open := uint64(total) - s.chunks.open(uint64(total)); open != uint64(total%16) {
			t.Fatalf("%d entries in the open chunk, want %d", open, total%16)
		}
	}
	check(s)
	must(t, s.Close())
	// The chunks' size is the state's: opened with this program's own
	// (2^12), the store keeps its chunks of 16.
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	if s.chunks.bits != 4 {
		t.Fatalf("reopened with chunks of 2^%d, want the state's 2^4", s.chunks.bits)
	}
	// No key of another kind of index.
	for _, k := range []byte{kindLeaf, kindHash} {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{k}, UpperBound: []byte{k + 1}})
		must(t, err)
		if it.First() {
			t.Errorf("a key under %q: %q", k, it.Key())
		}
		it.Close()
	}
}

// TestLeafIndexChunkOnce: the commit that completes a chunk writes its
// keys; a commit after that inside the next chunk writes none.
func TestLeafIndexChunkOnce(t *testing.T) {
	s, err := Open(t.TempDir(), smallChunks())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newAppender()
	var es [][]byte
	for i := range 16 {
		es = append(es, fmt.Appendf(nil, "e%d", i))
	}
	must(t, s.Commit(context.Background(), a.batch(es[:15])))
	if n := len(chunkKeys(t, s.r, 4)); n != 0 {
		t.Fatalf("%d keys before the chunk is complete", n)
	}
	must(t, s.Commit(context.Background(), a.batch(es[15:])))
	if n := len(chunkKeys(t, s.r, 4)); n != 16 {
		t.Fatalf("%d keys once the chunk is complete, want 16", n)
	}
	must(t, s.Commit(context.Background(), a.batch([][]byte{[]byte("e16")})))
	if n := len(chunkKeys(t, s.r, 4)); n != 16 {
		t.Fatalf("%d keys after one more entry, want 16", n)
	}
}

// downgrade makes the store in dir, whose entries are entries, one of an
// older state version: its leaf-hash index under 'i' (version 2) or 'h'
// (version 1), no key under 'j', and the state without its first chunked
// index.
func downgrade(t *testing.T, dir string, entries [][]byte, version byte) {
	t.Helper()
	db := openRaw(t, dir)
	b := db.NewBatch()
	must(t, b.DeleteRange([]byte{kindChunk}, []byte{kindChunk + 1}, nil))
	for i, e := range entries {
		lh := rfc6962.DefaultHasher.HashLeaf(e)
		k := appendLeafKey(nil, lh, uint64(i))
		if version == 1 {
			k = appendHashKey(nil, lh, uint64(i))
		}
		must(t, b.Set(k, nil, nil))
	}
	v, c, err := db.Get(stateKey)
	must(t, err)
	old := append([]byte{version}, v[1:9]...)
	old = append(old, v[18:]...)
	c.Close()
	must(t, b.Set(stateKey, old, nil))
	must(t, b.Commit(pebble.Sync))
	must(t, db.Close())
}

// stateOf returns the version and the first chunked index of s's state.
func stateOf(t *testing.T, s *Store) (version byte, chunked uint64) {
	t.Helper()
	v, c, err := s.db.Get(stateKey)
	must(t, err)
	defer c.Close()
	_, ci, _, err := decodeState(v)
	must(t, err)
	return v[0], ci.chunked
}

// TestLeafIndexVersion2 opens a store of state version 2, whose leaf-hash
// index is under 'i' over three epochs, some entries in it twice, and
// finds each first index; appends to it across chunks, again with an old
// entry and a new one twice, and finds old and new entries, before and
// after reopening. Once written, the store has state version 3 and names
// the size it had as the first index under 'j'.
func TestLeafIndexVersion2(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, smallChunks())
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender()
	const perEpoch = 1 << leafEpochBits
	const total = 2*perEpoch + 300
	entry := func(i int) []byte { return fmt.Appendf(nil, "entry %d", i) }
	// Entry 5 comes again at perEpoch+7 and 2*perEpoch+9, entry
	// perEpoch+20 again at 2*perEpoch+11.
	again := map[int]int{perEpoch + 7: 5, 2*perEpoch + 9: 5, 2*perEpoch + 11: perEpoch + 20}
	var all [][]byte
	for i := range total {
		e := entry(i)
		if j, ok := again[i]; ok {
			e = entry(j)
		}
		all = append(all, e)
	}
	for start := 0; start < total; start += 5000 {
		must(t, s.Commit(context.Background(), a.batch(all[start:min(start+5000, total)])))
	}
	must(t, s.Close())
	downgrade(t, dir, all, 2)

	open := func() *Store {
		s, err := Open(dir, smallChunks())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s = open()
	for _, i := range []int{0, 5, perEpoch - 1, perEpoch, perEpoch + 20, 2 * perEpoch, total - 1} {
		wantLeafIndex(t, s, entry(i), uint64(i))
	}
	for _, i := range []int{perEpoch + 7, 2*perEpoch + 9, 2*perEpoch + 11} {
		if _, err := leafIndexOf(t, s, entry(i)); !errors.Is(err, log.ErrNotFound) {
			t.Errorf("LeafIndex of entry %d, which was never appended: err = %v, want ErrNotFound", i, err)
		}
	}
	if v, _ := stateOf(t, s); v != 2 {
		t.Fatalf("state version %d before a commit, want 2 (opening writes nothing)", v)
	}
	// total is 12 past a chunk's start: the first batch ends the chunk, the
	// second completes two more and leaves 5 in the open one.
	more := [][]byte{[]byte("new 0"), entry(7), []byte("new 2")}
	for i := len(more); i < 4+2*16+5; i++ {
		more = append(more, fmt.Appendf(nil, "new %d", i))
	}
	more[20] = []byte("new 2")
	must(t, s.Commit(context.Background(), a.batch(more[:4])))
	must(t, s.Commit(context.Background(), a.batch(more[4:])))
	check := func(s *Store) {
		t.Helper()
		wantLeafIndex(t, s, entry(7), 7)
		wantLeafIndex(t, s, entry(perEpoch+20), perEpoch+20)
		wantLeafIndex(t, s, []byte("new 0"), total)
		wantLeafIndex(t, s, []byte("new 2"), total+2)
		wantLeafIndex(t, s, more[35], uint64(total+35))
		wantLeafIndex(t, s, more[40], uint64(total+40)) // in the open chunk
		for i, e := range more {
			if ok, err := s.HasLeaf(context.Background(), rfc6962.DefaultHasher.HashLeaf(e), uint64(total+i)); !ok || err != nil {
				t.Fatalf("HasLeaf(new entry %d) = %v, %v", i, ok, err)
			}
		}
		if ok, err := s.HasLeaf(context.Background(), rfc6962.DefaultHasher.HashLeaf(entry(perEpoch)), perEpoch); !ok || err != nil {
			t.Fatalf("HasLeaf(an old entry) = %v, %v", ok, err)
		}
		if v, chunked := stateOf(t, s); v != stateVersion || chunked != total {
			t.Fatalf("state version %d, first chunked index %d after a commit; want %d, %d", v, chunked, stateVersion, total)
		}
		// The chunk the upgrade began in has keys from total on.
		if idx := chunkKeys(t, s.r, 4); len(idx) != 4+2*16 || slices.Min(idx) != total {
			t.Fatalf("keys under 'j': %d from %d, want %d from %d", len(idx), slices.Min(idx), 4+2*16, total)
		}
	}
	check(s)
	must(t, s.Close())
	s = open()
	defer s.Close()
	check(s)
}

// TestLeafIndexVersion1 opens a store of state version 1, whose leaf-hash
// index is under 'h', appends to it, and finds old and new entries; an
// entry appended again after the upgrade is found at its first index.
// Once written, the store has state version 3.
func TestLeafIndexVersion1(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender()
	old := [][]byte{[]byte("old 0"), []byte("old 1"), []byte("old 2")}
	if err := s.Commit(context.Background(), a.batch(old)); err != nil {
		t.Fatal(err)
	}
	must(t, s.Close())
	downgrade(t, dir, old, 1)

	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, e := range old {
		wantLeafIndex(t, s, e, uint64(i))
	}
	if err := s.Commit(context.Background(), a.batch([][]byte{[]byte("new 3"), old[1]})); err != nil {
		t.Fatal(err)
	}
	wantLeafIndex(t, s, []byte("new 3"), 3)
	wantLeafIndex(t, s, old[1], 1)
	if v, chunked := stateOf(t, s); v != stateVersion || chunked != 3 {
		t.Fatalf("state version %d, first chunked index %d after a commit; want %d, 3", v, chunked, stateVersion)
	}
}

// TestAuditLeafIndex audits a log whose leaf-hash index is whole, then
// the same log with one entry's key taken out of its index (in a complete
// chunk): the audit names that entry.
func TestAuditLeafIndex(t *testing.T) {
	dir := t.TempDir()
	signer, v := logtest.NewKey(t, "faults.example/log")
	open := func() *Store {
		s, err := Open(dir, smallChunks())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	seq, err := server.OpenSequencer(context.Background(), s, signer, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Unix(1764547200, 0), v.Name(), "", []byte{1}, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []byte
	for i := range 20 { // 21 entries with the genesis: one chunk of 16 complete
		e := testEntry("audit", i)
		if _, err := seq.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		if i == 12 {
			missing = e
		}
	}
	if _, err := log.Audit(context.Background(), s, v, ""); err != nil {
		t.Fatalf("audit of a whole log: %v", err)
	}
	idx, err := leafIndexOf(t, s, missing)
	if err != nil {
		t.Fatal(err)
	}
	seq.Close()
	must(t, s.Close())

	db := openRaw(t, dir)
	must(t, db.Delete(appendChunkKey(nil, rfc6962.DefaultHasher.HashLeaf(missing), idx, 4), pebble.Sync))
	must(t, db.Close())
	s = open()
	defer s.Close()
	_, err = log.Audit(context.Background(), s, v, "")
	want := fmt.Sprintf("entry %d: the leaf hash index has no entry for it", idx)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("audit of a log missing a leaf hash key: %v, want %q", err, want)
	}
}

// TestChunkMissingLeafHash: the commit that completes a chunk reads the
// leaf hashes of the chunk's earlier entries; if one is gone, the commit
// is refused as corruption, writes nothing, and the store takes no more.
func TestChunkMissingLeafHash(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, smallChunks())
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender()
	var es [][]byte
	for i := range 16 {
		es = append(es, fmt.Appendf(nil, "e%d", i))
	}
	must(t, s.Commit(context.Background(), a.batch(es[:10])))
	must(t, s.Close())
	db := openRaw(t, dir)
	must(t, db.Delete(nodeKey(compact.NewNodeID(0, 5)), pebble.Sync))
	must(t, db.Close())

	s, err = Open(dir, smallChunks())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Commit(context.Background(), a.batch(es[10:]))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "leaf hash 5 is missing") {
		t.Fatalf("commit completing a chunk with a leaf hash gone: %v, want ErrCorrupt naming leaf hash 5", err)
	}
	if s.Err() == nil {
		t.Fatal("the store takes commits after finding corruption")
	}
	if st, err := s.State(context.Background()); err != nil || st.Size != 10 {
		t.Fatalf("state after the refused commit: size %d, %v; want 10", st.Size, err)
	}
	if n := len(chunkKeys(t, s.r, 4)); n != 0 {
		t.Fatalf("%d keys under 'j' after the refused commit", n)
	}
}

// TestRestoreCompletesChunk: the batch restored from the published record
// (Pebble's WAL lost it) is the one that completes a chunk of the
// leaf-hash index. Read-only, it is restored in memory over the store;
// writable, committed. Either way the chunk's keys are written, reading
// the earlier leaf hashes through what the store reads, and every entry
// is found.
func TestRestoreCompletesChunk(t *testing.T) {
	dir := t.TempDir()
	signer, v := logtest.NewKey(t, "faults.example/log")
	s, err := Open(dir, smallChunks())
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(context.Background(), s, signer, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Unix(1764547200, 0), v.Name(), "", []byte{1}, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 15 { // with the genesis, 16: the last append completes chunk 0
		if _, err := seq.Append(context.Background(), testEntry("restore", i)); err != nil {
			t.Fatal(err)
		}
	}
	seq.Close()
	must(t, s.Close())
	damage(t, newestWAL(t, dir), -300, false)

	check := func(s *Store) {
		t.Helper()
		es, err := s.Entries(context.Background(), 0, 16)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range es {
			wantLeafIndex(t, s, e, uint64(i))
		}
		if n := len(chunkKeys(t, s.r, 4)); n != 16 {
			t.Fatalf("%d keys under 'j' after the restore, want 16", n)
		}
	}
	o := smallChunks()
	o.ReadOnly = true
	ro, err := Open(dir, o)
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	if _, ok := ro.r.(*pebble.Batch); !ok {
		t.Fatal("read-only Open restored nothing: the test's premise is wrong")
	}
	check(ro)
	must(t, ro.Close())
	s, err = Open(dir, smallChunks())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	check(s)
}

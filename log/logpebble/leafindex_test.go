package logpebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
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

// TestLeafIndexEpochs appends entries over three epochs of the leaf-hash
// index, some of them twice, and finds each first index: in its own
// epoch, in an earlier one, and not at all.
func TestLeafIndexEpochs(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newAppender()
	const perEpoch = 1 << leafEpochBits
	const total = 2*perEpoch + 300
	entry := func(i int) []byte { return fmt.Appendf(nil, "entry %d", i) }
	// Entry 5 comes again at perEpoch+7 and 2*perEpoch+9, entry
	// perEpoch+20 again at 2*perEpoch+11.
	again := map[int]int{perEpoch + 7: 5, 2*perEpoch + 9: 5, 2*perEpoch + 11: perEpoch + 20}
	for start := 0; start < total; start += 1000 {
		var es [][]byte
		for i := start; i < min(start+1000, total); i++ {
			if j, ok := again[i]; ok {
				es = append(es, entry(j))
			} else {
				es = append(es, entry(i))
			}
		}
		if err := s.Commit(context.Background(), a.batch(es)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 5, perEpoch - 1, perEpoch, perEpoch + 20, 2 * perEpoch, total - 1} {
		wantLeafIndex(t, s, entry(i), uint64(i))
	}
	for _, i := range []int{perEpoch + 7, 2*perEpoch + 9, 2*perEpoch + 11} {
		if _, err := leafIndexOf(t, s, entry(i)); !errors.Is(err, log.ErrNotFound) {
			t.Errorf("LeafIndex of entry %d, which was never appended: err = %v, want ErrNotFound", i, err)
		}
	}
	if _, err := leafIndexOf(t, s, entry(total)); !errors.Is(err, log.ErrNotFound) {
		t.Errorf("LeafIndex of an entry past the end: err = %v, want ErrNotFound", err)
	}

	// One key an entry, in its epoch.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindLeaf}, UpperBound: []byte{kindLeaf + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		idx, err := leafKeyIndex(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if e := leafKeyEpoch(it.Key()); e != idx>>leafEpochBits {
			t.Fatalf("key of entry %d is in epoch %d", idx, e)
		}
		n++
	}
	if n != total {
		t.Fatalf("%d leaf-hash keys, want %d", n, total)
	}
}

// TestLeafIndexVersion1 opens a store of state version 1, whose leaf-hash
// index is under 'h', appends to it, and finds old and new entries; an
// entry appended again after the upgrade is found at its first index.
// Once written, the store has state version 2.
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

	// Make it version 1: the index under 'h', the state's version 1.
	db := openRaw(t, dir)
	b := db.NewBatch()
	for i, e := range old {
		lh := rfc6962.DefaultHasher.HashLeaf(e)
		must(t, b.Delete(appendLeafKey(nil, lh, uint64(i)), nil))
		must(t, b.Set(appendHashKey(nil, lh, uint64(i)), nil, nil))
	}
	v, c, err := db.Get(stateKey)
	must(t, err)
	v = bytes.Clone(v)
	c.Close()
	v[0] = 1
	must(t, b.Set(stateKey, v, nil))
	must(t, b.Commit(pebble.Sync))
	must(t, db.Close())

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
	v, c, err = s.db.Get(stateKey)
	must(t, err)
	defer c.Close()
	if v[0] != stateVersion {
		t.Fatalf("state version after a commit: %d, want %d", v[0], stateVersion)
	}
}

// TestAuditLeafIndex audits a log whose leaf-hash index is whole, then
// the same log with one entry's key taken out of its index: the audit
// names that entry.
func TestAuditLeafIndex(t *testing.T) {
	dir := t.TempDir()
	signer, v := logtest.NewKey(t, "faults.example/log")
	l, err := openFaultLog(t, dir, vfs.Default, signer, v)
	if err != nil {
		t.Fatal(err)
	}
	var missing []byte
	for i := range 20 {
		e := testEntry("audit", i)
		if _, err := l.seq.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		if i == 12 {
			missing = e
		}
	}
	if _, err := log.Audit(context.Background(), l.store, v, ""); err != nil {
		t.Fatalf("audit of a whole log: %v", err)
	}
	idx, err := leafIndexOf(t, l.store, missing)
	if err != nil {
		t.Fatal(err)
	}
	l.close()

	db := openRaw(t, dir)
	must(t, db.Delete(appendLeafKey(nil, rfc6962.DefaultHasher.HashLeaf(missing), idx), pebble.Sync))
	must(t, db.Close())
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = log.Audit(context.Background(), s, v, "")
	want := fmt.Sprintf("entry %d: the leaf hash index has no entry for it", idx)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("audit of a log missing a leaf hash key: %v, want %q", err, want)
	}
}

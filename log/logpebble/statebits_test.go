package logpebble

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestStateWithoutChunkBits opens stores whose state of version 3 lacks the
// byte naming the chunks' size, as the builds of main from 8f2e5ac (chunks
// of 2^14) to 9f9e776 (chunks of 2^12, from 3f114e6) wrote it on
// 2026-12-06, before caba502 added the byte. Such a data dir must stay
// readable: the store opens, finds every entry by its leaf hash (those under
// 'j' keys of the old layout and those in its open chunk), takes appends
// across a chunk boundary, and names the chunks' size it was written with
// in its state from then on.
func TestStateWithoutChunkBits(t *testing.T) {
	for _, tc := range []struct {
		bits uint
		size int
		v1   int // entries of a version 1 store it upgraded, if not 0
	}{
		{14, 1<<14 + 700, 0},    // 8f2e5ac: one chunk of 2^14 under 'j'
		{14, 5000, 0},           // 8f2e5ac: past 2^12 entries, no key under 'j' yet
		{12, 2<<12 + 300, 0},    // 3f114e6: two chunks of 2^12 under 'j'
		{12, 300, 0},            // 3f114e6: no key under 'j' yet
		{14, 1<<14 + 700, 3000}, // 8f2e5ac upgraded a version 1 store: chunk 0 from 3000
		{12, 2<<12 + 300, 5000}, // 3f114e6 likewise: chunk 1 from 5000
	} {
		t.Run(fmt.Sprintf("chunks of 2^%d, size %d, from version 1 at %d", tc.bits, tc.size, tc.v1), func(t *testing.T) {
			dir := t.TempDir()
			opts := &Options{testingOnlyChunkBits: tc.bits}
			s, err := Open(dir, opts)
			must(t, err)
			a := newAppender()
			entry := func(i int) []byte { return fmt.Appendf(nil, "entry %d", i) }
			var all [][]byte
			for i := range tc.size {
				all = append(all, entry(i))
			}
			start := 0
			if tc.v1 != 0 {
				must(t, s.Commit(context.Background(), a.batch(all[:tc.v1])))
				must(t, s.Close())
				downgrade(t, dir, all[:tc.v1], 1)
				s, err = Open(dir, opts)
				must(t, err)
				start = tc.v1
			}
			for ; start < tc.size; start += 4000 {
				must(t, s.Commit(context.Background(), a.batch(all[start:min(start+4000, tc.size)])))
			}
			must(t, s.Close())
			db := openRaw(t, dir)
			editState(t, db, func(v []byte) []byte { return append(v[:17], v[18:]...) }) // as 8f2e5ac wrote it
			must(t, db.Close())

			s, err = Open(dir, nil) // this program's chunk size, whatever the store's
			if err != nil {
				t.Fatalf("opening a store as %d chunks of 2^%d wrote it: %v", tc.size>>tc.bits, tc.bits, err)
			}
			for i := range tc.size {
				wantLeafIndex(t, s, entry(i), uint64(i))
			}
			more := make([][]byte, 1<<tc.bits)
			for i := range more {
				more[i] = entry(tc.size + i)
			}
			must(t, s.Commit(context.Background(), a.batch(more)))
			check := func(s *Store) {
				t.Helper()
				for _, i := range []int{0, tc.size - 1, tc.size, tc.size + len(more) - 1, (tc.size + len(more)) &^ (1<<tc.bits - 1)} {
					wantLeafIndex(t, s, entry(i), uint64(i))
				}
				v, c, err := s.db.Get(stateKey)
				must(t, err)
				_, ci, _, err := decodeState(v)
				c.Close()
				must(t, err)
				if ci.bits != tc.bits {
					t.Fatalf("state names chunks of 2^%d after a commit, want the store's 2^%d", ci.bits, tc.bits)
				}
			}
			check(s)
			must(t, s.Close())
			s, err = Open(dir, nil)
			must(t, err)
			defer s.Close()
			check(s)
		})
	}
}

// TestStoreOf8f2e5ac opens a copy of testdata/store-8f2e5ac, the Pebble
// store of a sidecar that build 8f2e5ac ran (calls, tasks, a purge, then
// kill -9 mid-call), whose state names no chunks' size: every entry is
// read and found by its leaf hash at its index, and an append verifies
// against the store's tree after reopening.
func TestStoreOf8f2e5ac(t *testing.T) {
	dir := t.TempDir()
	must(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "store-8f2e5ac"))))
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("opening the store 8f2e5ac wrote: %v", err)
	}
	ctx := context.Background()
	st, err := s.State(ctx)
	must(t, err)
	entries, err := s.Entries(ctx, 0, st.Size)
	must(t, err)
	if uint64(len(entries)) != st.Size || st.Size == 0 {
		t.Fatalf("%d entries read of the store's %d", len(entries), st.Size)
	}
	for i, e := range entries {
		if ok, err := s.HasLeaf(ctx, rfc6962.DefaultHasher.HashLeaf(e), uint64(i)); !ok || err != nil {
			t.Fatalf("HasLeaf(entry %d) = %v, %v", i, ok, err)
		}
	}
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr, err := rf.NewRange(0, st.Size, st.Range)
	must(t, err)
	a := &appender{rf: rf, cr: cr}
	must(t, s.Commit(ctx, a.batch([][]byte{[]byte("after the upgrade")})))
	must(t, s.Close())
	s, err = Open(dir, nil)
	must(t, err)
	defer s.Close()
	wantLeafIndex(t, s, []byte("after the upgrade"), st.Size)
}

package logpebble

import (
	"bytes"
	"context"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestNodeKeys checks what keys.go promises of node keys: every node has its
// own key, and the nodes appending completes come in key order within each
// tile level, so that the sequencer's writes are appends.
func TestNodeKeys(t *testing.T) {
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	seen := make(map[string]compact.NodeID)
	var last [8][]byte
	visit := func(id compact.NodeID, _ []byte) {
		k := nodeKey(id)
		if len(k) != nodeKeySize {
			t.Fatalf("key of %v is %d bytes, want %d", id, len(k), nodeKeySize)
		}
		if other, ok := seen[string(k)]; ok {
			t.Fatalf("nodes %v and %v have the same key %x", id, other, k)
		}
		seen[string(k)] = id
		tl := id.Level / 8
		if bytes.Compare(k, last[tl]) <= 0 {
			t.Fatalf("key %x of node %v does not follow %x, the key written before it at tile level %d", k, id, last[tl], tl)
		}
		last[tl] = k
	}
	for i := range 70000 {
		if err := cr.Append(rfc6962.DefaultHasher.HashLeaf([]byte{byte(i)}), visit); err != nil {
			t.Fatal(err)
		}
	}

	// A tile's nodes of level 8T are in order among the tile's keys.
	for _, tile := range []struct{ level uint }{{0}, {8}} {
		lo, hi := nodeKey(compact.NewNodeID(tile.level, 256)), nodeKey(compact.NewNodeID(tile.level, 511))
		for i := uint64(257); i < 511; i++ {
			k := nodeKey(compact.NewNodeID(tile.level, i))
			if bytes.Compare(k, lo) <= 0 || bytes.Compare(k, hi) >= 0 || !bytes.Equal(k[:10], lo[:10]) {
				t.Fatalf("node (%d, %d) key %x is not inside its tile [%x, %x]", tile.level, i, k, lo, hi)
			}
		}
	}
}

func TestSpanEnd(t *testing.T) {
	for _, c := range []struct {
		key, end []byte
	}{
		{entryKey(7), []byte{kindEntry + 1}},
		{stateKey, []byte{kindState + 1}},
		{nodeKey(compact.NodeID{Level: 3, Index: 9}), []byte{kindNode, 1}},
		{nodeKey(compact.NodeID{Level: 17, Index: 0}), []byte{kindNode, 3}},
		{[]byte{kindNode, 0xff}, []byte{kindNode + 1}},
		{[]byte{0xff, 1}, nil},
		{nil, nil},
	} {
		if got := spanEnd(c.key); !bytes.Equal(got, c.end) {
			t.Errorf("spanEnd(%x) = %x, want %x", c.key, got, c.end)
		}
		if c.end != nil && bytes.Compare(c.key, c.end) >= 0 {
			t.Errorf("spanEnd(%x) = %x is not after the key", c.key, c.end)
		}
	}
}

// TestTablesHoldOneSpan: every table Pebble writes, by flush or by
// compaction, holds keys of one span (spanEnd), so that a table of
// appended entries overlaps no older table. Without the span policy a
// flushed table runs from the first checkpoint key to the state key.
func TestTablesHoldOneSpan(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{MemTableSize: 1 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newAppender()
	fill(t, s, a, 400, 16, 512)
	must(t, s.db.Flush())
	must(t, s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false))
	fill(t, s, a, 50, 16, 512)
	must(t, s.db.Flush())
	levels, err := s.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for level, ts := range levels {
		for _, info := range ts {
			tables++
			lo, hi := info.Smallest.UserKey, info.Largest.UserKey
			if end := spanEnd(lo); end != nil && bytes.Compare(hi, end) >= 0 {
				t.Errorf("level %d table %s holds %x to %x, past its span's end %x", level, info.FileNum, lo, hi, end)
			}
		}
	}
	if tables < 5 {
		t.Fatalf("%d tables: want one for each kind at least", tables)
	}
}

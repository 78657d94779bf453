package logpebble

import (
	"bytes"
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

package logpebble

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log/internal/hot"
)

// loadHotSeek is loadHot as it was, one seek a node, level by level: the
// reference the one-pass loadHot must agree with.
func loadHotSeek(db reader, size, max uint64) (*hot.Nodes, error) {
	if size>>hot.Min(size, max) == 0 {
		return hot.Load(size, max, nil)
	}
	lower, upper := kindBounds(kindNode)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	key := make([]byte, 0, nodeKeySize)
	return hot.Load(size, max, func(lvl uint, count uint64, put func([]byte)) error {
		for i := range count {
			key = appendNodeKey(key[:0], compact.NewNodeID(lvl, i))
			if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
				if err := it.Error(); err != nil {
					return err
				}
				break
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if len(v) != hashSize {
				return fmt.Errorf("%w: node (%d, %d) is %d bytes", ErrCorrupt, lvl, i, len(v))
			}
			put(v)
		}
		return nil
	})
}

// hotStoreSize is the size of the store the loadHot tests read: odd, and
// with nodes in two tile levels (levels 0 to 11).
const hotStoreSize = 3001

// hotStore returns a store of hotStoreSize entries, committed in batches
// of uneven sizes.
func hotStore(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	a := newAppender()
	fill(tb, s, a, 3, 1000, 16)
	fill(tb, s, a, 1, 1, 16)
	return s
}

// A hotEdit changes a node key of the store, in a batch never committed:
// deletes it (a gap), or sets a value of size bytes (short: corruption).
type hotEdit struct {
	id     compact.NodeID
	delete bool
	size   int
}

// checkLoadHot compares loadHot with loadHotSeek on s's nodes as edits
// leave them, for a log of this size keeping at most max nodes.
func checkLoadHot(t *testing.T, s *Store, size, max uint64, edits []hotEdit) {
	t.Helper()
	b := s.db.NewIndexedBatch()
	defer b.Close()
	for _, e := range edits {
		var err error
		if e.delete {
			err = b.Delete(nodeKey(e.id), nil)
		} else {
			err = b.Set(nodeKey(e.id), make([]byte, e.size), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Keys in the nodes' range that are no node's key: too long, too
	// short, ending at leaf 6 (not the last of a pair) on level 1, on level 9.
	n7 := nodeKey(compact.NewNodeID(0, 7))
	for _, k := range [][]byte{append(nodeKey(compact.NewNodeID(4, 0)), 0), {kindNode, 0, 0}, append(nodeKey(compact.NewNodeID(0, 6))[:11], 1), append(n7[:11], 9)} {
		if err := b.Set(k, make([]byte, 5), nil); err != nil {
			t.Fatal(err)
		}
	}
	want, wantErr := loadHotSeek(b, size, max)
	got, gotErr := loadHot(b, size, max)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("size %d, max %d, edits %v: loadHot error %v, want %v", size, max, edits, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	var g, w [hashSize]byte
	for lvl := range uint(64) {
		for i := range size >> lvl {
			id := compact.NewNodeID(lvl, i)
			gok, wok := got.Read(id, g[:]), want.Read(id, w[:])
			if gok != wok || gok && g != w {
				t.Fatalf("size %d, max %d, edits %v: node (%d, %d) held %v %x, want %v %x", size, max, edits, lvl, i, gok, g, wok, w)
			}
		}
	}
}

func TestLoadHot(t *testing.T) {
	s := hotStore(t)
	id := compact.NewNodeID
	edits := [][]hotEdit{
		nil,
		{{id: id(4, 0), delete: true}},
		{{id: id(5, 3), delete: true}, {id: id(7, 1), size: 31}},
		{{id: id(6, 2), size: 33}, {id: id(4, 9), size: 0}},
		{{id: id(4, 9), delete: true}, {id: id(4, 10), size: 1}},
		{{id: id(8, 5), size: 31}, {id: id(9, 0), delete: true}},
		{{id: id(3, 100), delete: true}, {id: id(0, 2000), size: 31}},
		{{id: id(11, 0), delete: true}, {id: id(10, 1), size: 64}},
	}
	for _, size := range []uint64{1, 2, 3, 7, 8, 255, 256, 257, 1000, 2047, 2048, hotStoreSize} {
		for _, max := range []uint64{0, 1, 2, 3, 7, 20, 100, 600, maxHotNodes} {
			for _, e := range edits {
				checkLoadHot(t, s, size, max, e)
			}
		}
	}
}

func FuzzLoadHot(f *testing.F) {
	s := hotStore(f)
	f.Add(uint16(hotStoreSize), uint16(100), []byte{4, 0, 0, 5, 3, 31})
	f.Add(uint16(513), uint16(7), []byte{8, 1, 0})
	f.Fuzz(func(t *testing.T, size, max uint16, ops []byte) {
		var edits []hotEdit
		for ; len(ops) >= 3; ops = ops[3:] {
			lvl := uint(ops[0] % 12)
			e := hotEdit{id: compact.NewNodeID(lvl, uint64(ops[1])%(hotStoreSize>>lvl+1)), size: int(ops[2] % 40)}
			e.delete = e.size == 0
			edits = append(edits, e)
		}
		checkLoadHot(t, s, uint64(size)%(hotStoreSize+1), uint64(max), edits)
	})
}

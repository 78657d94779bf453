package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/compact"
)

// Tile geometry according to c2sp.org/tlog-tiles: each tile is 8 tree
// levels high and at most 256 hashes (or entries) wide.
const (
	TileHeight = 8
	TileWidth  = 1 << TileHeight
	// EntriesLevel is the Level of an entry bundle's Tile.
	EntriesLevel = -1
	maxTileLevel = 63
)

// A Tile names a hash tile (Level 0..63) or an entry bundle (Level ==
// EntriesLevel): the N-th tile of its level, holding W hashes or entries
// (W == TileWidth for a full tile, 1..255 for a partial one).
type Tile struct {
	Level int
	N     uint64
	W     int
}

// Path returns the tile's path below the log's prefix, e.g. "tile/0/x001/234"
// or "tile/entries/005.p/17".
func (t Tile) Path() string {
	var b strings.Builder
	b.WriteString("tile/")
	if t.Level == EntriesLevel {
		b.WriteString("entries")
	} else {
		b.WriteString(strconv.Itoa(t.Level))
	}
	b.WriteByte('/')
	n := fmt.Sprintf("%03d", t.N%1000)
	for rest := t.N / 1000; rest > 0; rest /= 1000 {
		n = fmt.Sprintf("x%03d/", rest%1000) + n
	}
	b.WriteString(n)
	if t.W != TileWidth {
		b.WriteString(".p/" + strconv.Itoa(t.W))
	}
	return b.String()
}

// ParseTilePath parses a tile path as [Tile.Path] writes it. It refuses
// anything else: levels above 63, groups that are not exactly three
// digits, missing "x" prefixes, and widths outside 1..255.
func ParseTilePath(path string) (Tile, error) {
	bad := func(why string) (Tile, error) {
		return Tile{}, fmt.Errorf("tile path %q: %s", path, why)
	}
	rest, ok := strings.CutPrefix(path, "tile/")
	if !ok {
		return bad("does not start with tile/")
	}
	lv, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no tile index")
	}
	var t Tile
	if lv == "entries" {
		t.Level = EntriesLevel
	} else {
		l, err := strconv.Atoi(lv)
		if err != nil || l < 0 || l > maxTileLevel || strconv.Itoa(l) != lv {
			return bad("level is not a number 0..63")
		}
		t.Level = l
	}
	t.W = TileWidth
	if i := strings.Index(rest, ".p/"); i >= 0 {
		w, err := strconv.Atoi(rest[i+3:])
		if err != nil || w < 1 || w >= TileWidth || strconv.Itoa(w) != rest[i+3:] {
			return bad("partial width is not a number 1..255")
		}
		t.W = w
		rest = rest[:i]
	}
	groups := strings.Split(rest, "/")
	if len(groups) > 7 {
		return bad("tile index too long")
	}
	for i, g := range groups {
		last := i == len(groups)-1
		if !last {
			var ok bool
			if g, ok = strings.CutPrefix(g, "x"); !ok {
				return bad("index groups before the last must start with x")
			}
		}
		if len(g) != 3 || strings.Trim(g, "0123456789") != "" {
			return bad("index groups must be three digits")
		}
		d, _ := strconv.ParseUint(g, 10, 64)
		if t.N > (1<<64-1-d)/1000 {
			return bad("tile index out of range")
		}
		t.N = t.N*1000 + d
	}
	if len(groups) > 1 && groups[0] == "x000" {
		return bad("tile index has a leading zero group")
	}
	return t, nil
}

// TileWidthAt returns the width of the tile at (level, n) in a tree of the
// given size: TileWidth for a full tile, 1..255 for the partial tile on the
// right edge, and 0 if the tile does not exist at that size. Entry bundles
// (level EntriesLevel) have the geometry of level 0.
func TileWidthAt(level int, n, size uint64) int {
	if level == EntriesLevel {
		level = 0
	}
	if level < 0 || level > maxTileLevel {
		return 0
	}
	// Number of hashes at tree level 8*level.
	var count uint64
	if shift := uint(TileHeight * level); shift < 64 {
		count = size >> shift
	}
	full := count / TileWidth
	switch {
	case n < full:
		return TileWidth
	case n == full:
		return int(count % TileWidth)
	default:
		return 0
	}
}

// NodeIDs returns the IDs of the tree nodes a hash tile holds: the hashes
// at tree level 8*Level, indices N*256 to N*256+W-1.
func (t Tile) NodeIDs() []compact.NodeID {
	ids := make([]compact.NodeID, t.W)
	for i := range ids {
		ids[i] = compact.NewNodeID(uint(t.Level*TileHeight), t.N*TileWidth+uint64(i))
	}
	return ids
}

// MarshalEntryBundle returns an entry bundle according to
// c2sp.org/tlog-tiles: each entry prefixed with its big-endian uint16
// length.
func MarshalEntryBundle(entries [][]byte) ([]byte, error) {
	n := 0
	for _, e := range entries {
		if len(e) > MaxEntrySize {
			return nil, ErrEntryTooLarge
		}
		n += 2 + len(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
	}
	return b, nil
}

// ParseEntryBundle splits an entry bundle into its entries.
func ParseEntryBundle(b []byte) ([][]byte, error) {
	var entries [][]byte
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, errors.New("entry bundle: truncated length prefix")
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, fmt.Errorf("entry bundle: entry %d truncated", len(entries))
		}
		entries = append(entries, b[2:2+n])
		b = b[2+n:]
		if len(entries) > TileWidth {
			return nil, errors.New("entry bundle: more than 256 entries")
		}
	}
	return entries, nil
}

package log_test

import (
	"testing"

	"github.com/provlog/provlog/log"
)

// FuzzParseTilePath checks that ParseTilePath never panics and that what it
// accepts is exactly what Tile.Path writes.
func FuzzParseTilePath(f *testing.F) {
	for _, s := range []string{
		"tile/0/000", "tile/0/x001/x234/067", "tile/entries/005.p/17", "tile/63/999.p/255",
		"tile/1/x018/x446/x744/x073/x709/x551/615", "tile/1/x018/x446/x744/x073/x709/x551/616",
		"tile/0/000.p/0", "tile/00/000", "tile/0/x000/001", "tile/entries/x001/000.p/256",
		"tile/8/0/000", "tile/0/000.p/", "tile/0/.p/1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		tile, err := log.ParseTilePath(path)
		if err != nil {
			return
		}
		if tile.Level != log.EntriesLevel && (tile.Level < 0 || tile.Level > 63) {
			t.Fatalf("ParseTilePath(%q): level %d", path, tile.Level)
		}
		if tile.W < 1 || tile.W > log.TileWidth {
			t.Fatalf("ParseTilePath(%q): width %d", path, tile.W)
		}
		if got := tile.Path(); got != path {
			t.Fatalf("ParseTilePath(%q).Path() = %q", path, got)
		}
	})
}

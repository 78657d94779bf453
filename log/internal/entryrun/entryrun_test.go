package entryrun

import (
	"errors"
	"testing"

	"github.com/provlog/provlog/log"
)

var errCorrupt = errors.New("corrupt")

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		start, end, size uint64
		ok               bool
	}{{0, 0, 0, true}, {0, 3, 3, true}, {2, 2, 3, true}, {1, 4, 3, false}, {3, 2, 5, false}, {0, 1, 0, false}} {
		err := Check(c.start, c.end, c.size)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, log.ErrNotFound) {
			t.Errorf("Check(%d, %d, %d) = %v", c.start, c.end, c.size, err)
		}
	}
}

func TestRun(t *testing.T) {
	r := New(5, 8, 10, errCorrupt)
	for i := uint64(5); i < 8; i++ {
		if err := r.Add(i, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.Entries()
	if err != nil || len(got) != 3 || got[0][0] != 5 || got[2][0] != 7 {
		t.Fatalf("Entries() = %v, %v", got, err)
	}

	gap := New(5, 8, 10, errCorrupt)
	gap.Add(5, nil)
	if err := gap.Add(7, nil); !errors.Is(err, errCorrupt) || err.Error() != "corrupt: entry 6 of a log of size 10 is missing" {
		t.Errorf("a gap: %v", err)
	}
	if _, err := gap.Entries(); !errors.Is(err, errCorrupt) {
		t.Errorf("Entries of a run with a gap: %v", err)
	}

	short := New(5, 8, 10, errCorrupt)
	short.Add(5, nil)
	if _, err := short.Entries(); !errors.Is(err, errCorrupt) || err.Error() != "corrupt: entry 6 of a log of size 10 is missing" {
		t.Errorf("a short run: %v", err)
	}
}

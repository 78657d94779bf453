package anchor_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
)

// TestStoreNames: a record's name holds its size, a sequence number from
// the second record of a size on, and the first 16 hex digits of its
// SHA-256, so that two sidecars of one log anchoring the same size name
// their records apart; names given before the hash are read as before,
// in order.
func TestStoreNames(t *testing.T) {
	dir := t.TempDir()
	s, err := anchor.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Records from before names held a hash.
	legacy := []string{"00000000000000000007.json", "00000000000000000007-1.json", "00000000000000000003.json"}
	for _, n := range legacy {
		b, err := (&anchor.Record{V: anchor.RecordVersion, Size: uint64(n[19] - '0'), Created: time.Unix(int64(len(n)), 0)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var put []*anchor.Stored
	for i, size := range []uint64{9, 9, 7} {
		st, err := s.Put(&anchor.Record{V: anchor.RecordVersion, Size: size, Created: time.Unix(int64(100+i), 0)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(st.Name, "-"+st.SHA256[:16]+".json") {
			t.Errorf("record %s: its name does not end in its SHA-256's first 16 hex digits (%s)", st.Name, st.SHA256)
		}
		put = append(put, st)
	}
	want := []string{
		"00000000000000000003.json",
		"00000000000000000007.json",
		"00000000000000000007-1.json",
		"00000000000000000007-2-" + put[2].SHA256[:16] + ".json",
		"00000000000000000009-" + put[0].SHA256[:16] + ".json",
		"00000000000000000009-1-" + put[1].SHA256[:16] + ".json",
	}
	names, err := s.Names()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, want) {
		t.Errorf("Names() = %q, want %q", names, want)
	}
	for _, n := range want {
		if st, err := s.Get(n); err != nil || st.Err != nil {
			t.Errorf("Get(%s): %v %v", n, err, st.Err)
		}
	}
	if last, err := s.Last(); err != nil || last.Name != want[len(want)-1] {
		t.Errorf("Last() = %v, %v; want %s", last, err, want[len(want)-1])
	}
	for _, bad := range []string{"00000000000000000009-3FA9C2D18E7B0C41.json", "00000000000000000009-abc.json", "00000000000000000009-0-0123456789abcdef.json"} {
		if _, err := s.Get(bad); err == nil {
			t.Errorf("Get(%s) accepted a name the store never gives", bad)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestViewConsistency: provlog view of a bundle serves
// /log/proof/consistency from what the bundle holds (its entries and
// tree.json's compact ranges), as the page asks for it to link a tree of
// another size (an anchor's, a step's receipt) to the bundle's
// checkpoint: from every size the bundle's nodes reach (those from its
// first entry to its last, at least), the log's own proof; from a size
// they do not reach, a 404 saying what the proof would need. Before,
// every request was "404 page not found", and the page's steps were "not
// checked: no consistency proof is available here".
func TestViewConsistency(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 40) // 41 entries with the genesis entry
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size
	want := map[uint64][][]byte{}
	for old := uint64(0); old <= size; old++ {
		if want[old], err = log.ProveConsistency(ctx, s, old, size); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	for _, r := range []struct{ from, to uint64 }{{0, 41}, {5, 17}, {16, 32}, {31, 41}, {13, 14}} {
		t.Run(fmt.Sprintf("%d-%d", r.from, r.to), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle")
			if o, code := runCmd(t, "export", "--data", data, "--out", out, "--from", fmt.Sprint(r.from), "--to", fmt.Sprint(r.to)); code != 0 {
				t.Fatalf("export: %s", o)
			}
			base := serveView(t, ctx, out)
			served := 0
			for old := uint64(0); old <= size; old++ {
				resp, body := getView(t, base, fmt.Sprintf("/log/proof/consistency?old=%d&new=%d", old, size))
				switch {
				case resp.StatusCode == http.StatusOK:
					served++
					var got [][]byte
					for _, l := range strings.Fields(body) {
						h, err := base64.StdEncoding.DecodeString(l)
						if err != nil {
							t.Fatalf("old %d: %q is not base64", old, l)
						}
						got = append(got, h)
					}
					if !slices.EqualFunc(got, want[old], bytes.Equal) {
						t.Errorf("old %d: the view's proof differs from the log's", old)
					}
				case old >= r.from && old <= r.to:
					t.Errorf("old %d, within the bundle's entries [%d, %d]: %d %s", old, r.from, r.to, resp.StatusCode, body)
				case resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "tree.json"):
					t.Errorf("old %d: %d %q, want 404 saying what the bundle lacks", old, resp.StatusCode, body)
				}
			}
			t.Logf("%d of %d old sizes proven", served, size+1)
			if resp, body := getView(t, base, fmt.Sprintf("/log/proof/consistency?old=%d&new=%d", size, size+1)); resp.StatusCode != http.StatusNotFound {
				t.Errorf("new past the bundle's checkpoint: %d %s", resp.StatusCode, body)
			}
		})
	}
}

package bundle

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// TestProvResultFormMappings: only mapping 3 says how a result was
// hashed; the mappings before it still give the documents their bundles
// hold, which never said it (testdata/mapping2 has no such entry to show
// it).
func TestProvResultFormMappings(t *testing.T) {
	b, err := (&log.CallResultEntry{Time: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC), Actor: "bob", Call: 1,
		ResultSHA256: strings.Repeat("ab", 32), ResultBytes: 9, ResultRaw: true, ResultRemarshalled: true, Duration: 5}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []int{ProvMappingNoAuth, ProvMappingAuth, ProvMappingOwnActors} {
		w, err := newProvWriter("o", m)
		if err != nil {
			t.Fatal(err)
		}
		w.add(2, b, e)
		var doc bytes.Buffer
		err = w.finish(&doc)
		w.close()
		if err != nil {
			t.Fatal(err)
		}
		want := m >= ProvMappingOwnActors
		for _, attr := range []string{`"provlog:canonical":false`, `"provlog:remarshalled":true`} {
			if got := bytes.Contains(doc.Bytes(), []byte(attr)); got != want {
				t.Errorf("mapping %d: has %s: %v, want %v\n%s", m, attr, got, want, doc.Bytes())
			}
		}
	}
}

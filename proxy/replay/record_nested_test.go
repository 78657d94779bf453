package replay

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestParseRecordNestedAllocs: record_replay hands ParseRecord whatever
// fields a client sent, up to log.MaxEntrySize bytes of JSON, which may
// nest 10,000 deep. Refusing a member nested so is linear in its size:
// before, the search for a null built the path of every value it
// visited, each longer than its parent's, so 60 KB of brackets cost
// 152 MB.
func TestParseRecordNestedAllocs(t *testing.T) {
	const depth = 9990
	body := `{"range":{"from":0,"to":1},"runs":1,"outcomes_sha256":"` + strings.Repeat("a", 64) + `","counts":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	if len(body) > log.MaxEntrySize {
		t.Fatalf("%d bytes, over an entry", len(body))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ParseRecord(&log.Entry{Kind: KindReplay, Fields: fields})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("counts nested 9,990 deep: taken")
	}
	got := after.TotalAlloc - before.TotalAlloc
	// Decoding it into the record's types (encoding/json, a []any per
	// level) costs about 100 bytes per byte of brackets, whatever the
	// depth.
	if got > 128*uint64(len(body)) {
		t.Errorf("ParseRecord of %d bytes of fields nested %d deep allocated %d MB (%.1f times their size), want it linear", len(body), depth, got>>20, float64(got)/float64(len(body)))
	}
}

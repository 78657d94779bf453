package oppmcp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTrimCutsWholeCharacters: an unknown argument's name over 40 bytes
// is shown cut at a character's start, never half of one (which %q
// shows as bytes: "\xc3…").
func TestTrimCutsWholeCharacters(t *testing.T) {
	name := "a" + strings.Repeat("é", 30)
	raw, _ := json.Marshal(map[string]any{name: 1})
	bad := 0
	for _, d := range tools {
		_, err := decode(d.params, raw)
		if err == nil {
			t.Fatalf("%s: took unknown argument %q", d.name, name)
		}
		if msg := err.Error(); strings.Contains(msg, `\x`) {
			bad++
			t.Errorf("%s: %s", d.name, msg)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d tools showed half a character", bad, len(tools))
	}
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// TestConfigLookAlikeActors: a config naming two actors a reader takes
// for one (the same id in composed and decomposed form, a Cyrillic а for
// a Latin a, fullwidth letters) is refused, naming both: otherwise a task
// handed off to one shows in provlog tasks, the UI and every entry as
// owned by the other. Ids that merely share letters load as before.
func TestConfigLookAlikeActors(t *testing.T) {
	entry := func(id string, n int) string {
		sum := sha256.Sum256([]byte(fmt.Sprintf("token-%d", n)))
		return fmt.Sprintf("  - {id: %q, token_sha256: %s}\n", id, hex.EncodeToString(sum[:]))
	}
	for _, c := range []struct {
		a, b    string
		refused bool
	}{
		{"jos\u00e9", "jose\u0301", true},
		{"alice", "\u0430lice", true},
		{"alice", "\uff41lice", true},
		{"alice", "alice2", false},
		{"alice", "bob", false},
	} {
		dir := t.TempDir()
		p := writeConfig(t, dir, "data: data\nactors:\n"+entry(c.a, 1)+entry(c.b, 2))
		_, err := loadConfig(p)
		switch {
		case c.refused && err == nil:
			t.Errorf("actors %q and %q: the config loads", c.a, c.b)
		case c.refused && !(strings.Contains(err.Error(), fmt.Sprintf("%q", c.a)) && strings.Contains(err.Error(), fmt.Sprintf("%q", c.b))):
			t.Errorf("actors %q and %q: %v (names not both)", c.a, c.b, err)
		case !c.refused && err != nil:
			t.Errorf("actors %q and %q: %v", c.a, c.b, err)
		}
	}
}

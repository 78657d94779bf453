package proxy

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// TestStderrPauseWholeCore: base64 of a redacted value whose last
// character holds bits of the byte after it too, wrapped so that a line
// ends after the characters all of whose bits are the value's
// (base64Cores) and before that last one, and a pause there: the line is
// logged as [redacted]. It held every character of the value's base64
// but the last, which decodes to all its bytes but the last; unfinished
// looked for a core's start but not the whole core, and the line was
// logged as it came.
func TestStderrPauseWholeCore(t *testing.T) {
	const secret = "sk-Paused/at+core" // 17 bytes: its base64 ends in a character shared with the next byte
	for off := range 3 {
		data := append(bytes.Repeat([]byte{0xfb}, off), secret...)
		data = append(data, bytes.Repeat([]byte{0xfb}, 30)...)
		e := base64.StdEncoding.EncodeToString(data)
		to := 8 * (off + len(secret)) / 6 // the end of the value's core
		got, _ := stderrPaused(t, []string{"[begin]\n" + e[:to] + "\n", e[to:] + "\n[end]\n"}, secret, 0)
		if len(got) != 4 || got[1] != Redacted || got[2] != Redacted {
			t.Errorf("at %d: logged %q, want the two lines of base64 as %q", off, got, Redacted)
		}
		if strings.Contains(strings.Join(got, "\n"), e[(8*off+5)/6:to]) {
			t.Errorf("at %d: the log holds the value's base64 but its last character", off)
		}
	}
}

// TestStderrPauseCharBefore: base64 of a redacted value whose first
// character holds bits of the byte before it too, that character the last
// of a line and the value's core (base64Cores) the whole of the next, a
// pause after it: both lines are logged as [redacted]. The run read back
// was only as long as the longest core, and the line holding the
// character before it was logged as it came.
func TestStderrPauseCharBefore(t *testing.T) {
	const secret = "skPausedAtCoreXYZ" // 17 bytes, no other form: its cores are its longest
	const off = 14                     // its first character, 18, holds two bits of it
	data := append(bytes.Repeat([]byte{0xfb}, off), secret...)
	data = append(data, bytes.Repeat([]byte{0xfb}, 30)...)
	e := base64.StdEncoding.EncodeToString(data)
	from, to := (8*off+5)/6, 8*(off+len(secret))/6
	got, _ := stderrPaused(t, []string{"[begin]\n" + e[:from] + "\n" + e[from:to] + "\n", e[to:] + "\n[end]\n"}, secret, 0)
	if len(got) != 5 || got[1] != Redacted || got[2] != Redacted || got[3] != Redacted {
		t.Errorf("logged %q, want the three lines of base64 as %q", got, Redacted)
	}
}

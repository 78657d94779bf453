package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// TestStderrBounded: a server that prints more on stderr than
// maxStderrBytes in a stderrWindow has what is past the bound left out
// of the proxy's log, and one line in its place says how many lines and
// bytes were left out; what is logged is still scrubbed. Every line was
// logged: 100 MB of a server's stderr became 189 MB of the sidecar's log.
func TestStderrBounded(t *testing.T) {
	const secret = "sk-Chatty/41+Qe"
	var text strings.Builder
	lines := 3 * maxStderrBytes / 100
	for i := range lines {
		fmt.Fprintf(&text, "line %07d token=%s %s\n", i, secret, strings.Repeat("x", 100-35-len(secret)))
	}
	got, _ := stderrLines(t, text.String(), secret, 0)
	logged, bytes := 0, 0
	var notes []string
	for _, l := range got {
		if strings.Contains(l, secret) {
			t.Fatalf("a logged line holds the redacted value: %q", l)
		}
		if strings.HasPrefix(l, "line ") {
			logged++
			bytes += len(l)
			continue
		}
		notes = append(notes, l)
	}
	if bytes > maxStderrBytes {
		t.Errorf("%d lines, %d bytes of the server's stderr logged, want at most %d bytes", logged, bytes, maxStderrBytes)
	}
	want := fmt.Sprintf("[%d lines of stderr left out", lines-logged)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], want) {
		t.Errorf("lines in place of what was left out: %q, want one starting %q", notes, want)
	}
}

package proxy

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestStderrPauseSplit: base64 of a redacted value, wrapped in lines, that
// a server prints with a pause longer than heldStderrWait inside it (after
// the line its characters start in, or after every line) is not in what
// is logged: every line holding its characters is logged as [redacted],
// but the one a pause ends if it holds fewer than minUnfinished of them;
// the lines before it are logged as they came. The wait logged the lines
// before the pause as they came, and those after it were scrubbed alone:
// the value was in neither part whole, and both halves were logged.
func TestStderrPauseSplit(t *testing.T) {
	const width = 76 // characters of a line; 57 bytes
	for _, tc := range []struct {
		secret   string
		from, to int  // the value's offsets tried: its characters straddle the first break
		every    bool // a pause after every line, not only the first
	}{
		{"sk-Paused/500+ms", 57 - 15, 57, false},
		{"sk-Paused/500+ms", 57 - 15, 57, true},
		{strings.Repeat("sk-Slowly/printed+", 6), 57 - 20, 57, true}, // over three lines
	} {
		for off := tc.from; off < tc.to; off++ {
			data := append(bytes.Repeat([]byte{0xfb}, off), tc.secret...)
			data = append(data, bytes.Repeat([]byte{0xfb}, 57*2)...)
			lines := strings.Split(mimeWrap(base64.StdEncoding, data, "\n"), "\n")
			parts := []string{"[begin]\n" + lines[0] + "\n"}
			if tc.every {
				for _, l := range lines[1:] {
					parts = append(parts, l+"\n")
				}
				parts = append(parts, "[end]\n")
			} else {
				parts = append(parts, strings.Join(lines[1:], "\n")+"\n[end]\n")
			}
			got, short := stderrPaused(t, parts, tc.secret, 0)
			if len(got) != len(lines)+2 || short > 0 {
				t.Fatalf("%d at %d: %d lines logged, %d pauses short, want %d and none", len(tc.secret), off, len(got), short, len(lines)+2)
			}
			if scrub(strings.Join(got, "\n"), appendSecrets(nil, tc.secret)) == Redacted {
				t.Errorf("%d at %d (every line %v): what was logged holds base64 of the value: %q", len(tc.secret), off, tc.every, got)
				continue
			}
			// The characters all of whose bits are the value's (base64Cores).
			from, to := (8*off+5)/6, 8*(off+len(tc.secret))/6
			first := true
			for i, line := range lines {
				n := min(to, (i+1)*width) - max(from, i*width) // the value's characters in line i
				switch {
				case n <= 0 && (i+1)*width < from-1 && got[1+i] != line:
					t.Errorf("%d at %d: line %d, before the value, was logged as %q", len(tc.secret), off, i, got[1+i])
				case n > 0 && got[1+i] != Redacted && !(first && n < minUnfinished):
					t.Errorf("%d at %d (every line %v): line %d holds %d characters of the value, logged as %q", len(tc.secret), off, tc.every, i, n, got[1+i])
				}
				if n > 0 {
					first = false
				}
			}
		}
	}
}

// TestStderrPauseEscaped: base64 of a redacted value in a JSON text that
// breaks its lines with escapes ("\n" inside a string), its first part
// before an escaped break and a pause after the line, its rest in the
// line after the pause: the line it starts in is logged as [redacted], as
// are the lines after the pause. Read as it is, the line's run starts
// after the escape, in the middle of the value's base64, and was logged
// as it came.
func TestStderrPauseEscaped(t *testing.T) {
	const secret = "sk-Escaped/in+JSON/text-of-forty-bytes!!"
	data := append(bytes.Repeat([]byte{0xfb}, 30), secret...)
	data = append(data, bytes.Repeat([]byte{0xfb}, 30)...)
	e := base64.StdEncoding.EncodeToString(data) // the value's characters: 40 to 93
	got, _ := stderrPaused(t, []string{
		`{"pem": "` + e[:50] + `\n` + e[50:90] + "\n",
		e[90:] + `"}` + "\n[end]\n",
	}, secret, 0)
	if want := []string{Redacted, Redacted, "[end]"}; !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}

// TestStderrPauseLogged: a real stdio server prints the first line of
// base64 of its call's redacted token, wrapped, then, after the proxy's
// wait logged it (a pause, however long), the rest: the proxy's log holds
// neither half in clear. The first line was logged by the wait as it came
// and the rest scrubbed alone, so the value's base64 was in the log in
// two halves.
func TestStderrPauseLogged(t *testing.T) {
	const secret = "sk-Printed/slowly+Zx"
	data := append(bytes.Repeat([]byte{0xfb}, 57-9), secret...)
	data = append(data, bytes.Repeat([]byte{0xfb}, 57)...)
	lines := strings.Split(mimeWrap(base64.StdEncoding, data, "\n"), "\n")
	p, buf, print := leaksProxy(t, secret)
	print("[cert]\n" + lines[0] + "\n")
	// The wait logs the held line only when no line came after it for
	// heldStderrWait: the pause is as long as that, at least.
	proctest.WaitFor(t, "the line before the pause logged", func() bool { return len(stderrLogged(buf)) >= 2 })
	print(strings.Join(lines[1:], "\n") + "\n[end]\n")
	p.Close()
	got := stderrLogged(buf)
	if len(got) != len(lines)+2 {
		t.Fatalf("logged %q, want %d lines", got, len(lines)+2)
	}
	if scrub(strings.Join(got, "\n"), appendSecrets(nil, secret)) == Redacted {
		t.Errorf("the proxy's log holds the token's base64, split at the pause: %q", got)
	}
	for i := range 2 {
		if got[1+i] != Redacted {
			t.Errorf("line %d of the base64, holding the token's, was logged as %q", i, got[1+i])
		}
	}
	checkLogScrubbed(t, buf, secret)
}

// stderrLogged returns the server's stderr lines in the proxy's log (a
// text handler's), in order.
func stderrLogged(buf *proctest.Buffer) []string {
	var out []string
	for _, rec := range linesWith(buf, "downstream stderr") {
		_, v, ok := strings.Cut(rec, " line=")
		if !ok {
			continue
		}
		if q, err := strconv.QuotedPrefix(v); err == nil {
			v, _ = strconv.Unquote(q)
		}
		out = append(out, v)
	}
	return out
}

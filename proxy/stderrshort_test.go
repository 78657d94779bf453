package proxy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestStderrShortSplit: base64 of a redacted value that a line ends
// with the start of, in a run of fewer than minHeldRun characters
// ("Authorization: Basic dXN", its rest the next line, as a terminal
// wraps it), a pause between the two lines or not: the next line is
// logged as [redacted], and so is the first if it holds minUnfinished
// or more of the value's characters (base64Cores). Neither line was
// held, each was scrubbed alone, and both were logged as they came: the
// value but its first two bytes in the second.
func TestStderrShortSplit(t *testing.T) {
	const secret = "user:hunter22-password"
	const prefix = "Authorization: Basic "
	for off := range 3 {
		data := append(bytes.Repeat([]byte{0xfb}, off), secret...)
		e := base64.StdEncoding.EncodeToString(data)
		from := (8*off + 5) / 6 // the value's first character all of whose bits are its own
		for cut := 1; cut <= from+14; cut++ {
			for _, paused := range []bool{false, true} {
				first, rest := prefix+e[:cut]+"\n", e[cut:]+"\n[end]\n"
				parts := []string{first + rest}
				if paused {
					parts = []string{first, rest}
				}
				got, _ := stderrPaused(t, parts, secret, 0)
				name := fmt.Sprintf("at %d, %d characters before the break (pause %v)", off, cut, paused)
				if len(got) != 3 || got[2] != "[end]" {
					t.Fatalf("%s: logged %q", name, got)
				}
				if got[1] != Redacted {
					t.Errorf("%s: the line with the value's rest was logged as %q", name, got[1])
				}
				switch n := cut - from; {
				case n >= minUnfinished && got[0] != Redacted:
					t.Errorf("%s: the line ending in %d of the value's characters was logged as %q", name, n, got[0])
				case n < minUnfinished && got[0] != strings.TrimSuffix(first, "\n"):
					t.Errorf("%s: the line ending in %d of the value's characters was logged as %q", name, n, got[0])
				}
			}
		}
	}
}

// TestStderrShortRunHeld: with a redacted value remembered, a line
// ending in a short run of base64 that is the start of the value's is
// held (logged only when what goes on from it comes, or the server's
// stderr ends), and one ending in a short run that is not is logged as
// it comes, as is every line while no value is remembered.
func TestStderrShortRunHeld(t *testing.T) {
	const secret = "user:hunter22-password"
	e := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, tc := range []struct {
		line     string
		remember bool
		held     bool
	}{
		{"Authorization: Basic " + e[:12], true, true},
		{"Authorization: Basic " + e[:minUnfinished], true, true},
		{"Authorization: Basic " + e[:minUnfinished-1], true, false},
		{"Authorization: Basic " + e[1:13], true, false}, // the value's characters, not its start
		{"Authorization: Basic bm90IHRoZSB2", true, false},
		{"Authorization: Basic " + e[:12], false, false},
		{"server started", true, false},
	} {
		var logs lockedBuf
		d := &downstream{p: &Proxy{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, cfg: ServerConfig{ID: "s"}}
		if tc.remember {
			d.secrets.remember(appendSecrets(nil, secret))
		}
		l := &lineLogger{d: d}
		l.Write([]byte(tc.line + "\n"))
		if held := !strings.Contains(logs.String(), "downstream stderr"); held != tc.held {
			t.Errorf("%q (a value remembered: %v): held %v, want %v", tc.line, tc.remember, held, tc.held)
		}
		l.end()
		if !strings.Contains(logs.String(), "downstream stderr") {
			t.Errorf("%q: not logged at the end", tc.line)
		}
	}
}

// TestStderrShortLogged: a real stdio server prints a line ending in the
// first characters of base64 of its call's redacted token (3, or 12,
// fewer than minHeldRun), then, at once or after the proxy's wait logged
// what it held (a pause, however long), the rest of it: the proxy's log
// holds neither the token's base64 nor more than its first three
// characters. Both lines were logged as they came, the second with the
// value but its first two bytes.
func TestStderrShortLogged(t *testing.T) {
	const secret = "user:hunter22-password"
	e := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, tc := range []struct {
		cut    int
		paused bool
	}{{3, false}, {3, true}, {12, false}, {12, true}} {
		t.Run(fmt.Sprintf("%d characters, pause %v", tc.cut, tc.paused), func(t *testing.T) {
			p, buf, print := leaksProxy(t, secret)
			first, rest := "Authorization: Basic "+e[:tc.cut]+"\n", e[tc.cut:]+"\n[end]\n"
			if tc.paused {
				print(first)
				// A held line is logged only when no line came after it
				// for heldStderrWait: the pause is as long as that, at least.
				proctest.WaitFor(t, "the line before the pause logged", func() bool { return len(stderrLogged(buf)) >= 1 })
				print(rest)
			} else {
				print(first + rest)
			}
			p.Close()
			got := stderrLogged(buf)
			if len(got) != 3 || got[1] != Redacted {
				t.Fatalf("logged %q, want 3 lines, the second %q", got, Redacted)
			}
			if tc.cut >= minUnfinished && got[0] != Redacted {
				t.Errorf("the line ending in %d characters of the token's base64 was logged as %q", tc.cut, got[0])
			}
			if strings.Contains(strings.Join(got, "\n"), e[3:11]) {
				t.Errorf("the proxy's log holds the token's base64 after its first three characters: %q", got)
			}
			checkLogScrubbed(t, buf, secret)
		})
	}
}

// TestStderrPlainWrapped: a redacted value itself (not its base64),
// wrapped with the base64-like text around it over lines that are held
// (each ends in a long run of base64 characters), broken at each of its
// characters: the lines holding it are logged as [redacted], and what is
// logged does not hold it, read across its breaks. The held block was
// scrubbed as one text with its breaks, where the value is not whole,
// and each line alone: both halves were logged.
func TestStderrPlainWrapped(t *testing.T) {
	const secret = "sk-Plain/Wrapped+Token-0123456789"
	const width = 40
	for off := width - len(secret) + 1; off < width; off++ {
		text := strings.Repeat("Q", off) + secret + strings.Repeat("Q", 2*width)
		var lines []string
		for i := 0; i < len(text); i += width {
			lines = append(lines, text[i:min(i+width, len(text))])
		}
		got, _ := stderrLines(t, "[begin]\n"+strings.Join(lines, "\n")+"\n[end]\n", secret, 0)
		if len(got) != len(lines)+2 {
			t.Fatalf("at %d: logged %q", off, got)
		}
		for i := range 2 {
			if got[1+i] != Redacted {
				t.Errorf("at %d: line %d, holding a part of the value, was logged as %q", off, i, got[1+i])
			}
		}
		if out := unwrap(strings.Join(got, "\n"), false); strings.Contains(out, secret[:len(secret)/2]) || strings.Contains(out, secret[len(secret)/2:]) {
			t.Errorf("at %d: what was logged holds half the value: %q", off, got)
		}
	}
}

// TestStderrPlainLogged: a real stdio server prints its call's redacted
// token itself, wrapped in the middle over two lines of base64-like
// text: the proxy's log holds neither half. Both were logged as they
// came, each line scrubbed alone.
func TestStderrPlainLogged(t *testing.T) {
	const secret = "sk-Plain/Wrapped+Token-0123456789"
	text := strings.Repeat("Q", 24) + secret[:16] + "\n" + secret[16:] + strings.Repeat("Q", 40) + "\n[end]\n"
	p, buf, print := leaksProxy(t, secret)
	print(text)
	p.Close()
	got := stderrLogged(buf)
	if len(got) != 3 || got[0] != Redacted || got[1] != Redacted {
		t.Errorf("logged %q, want the two lines holding the token as %q", got, Redacted)
	}
	for _, half := range []string{secret[:16], secret[16:]} {
		if got := linesWith(buf, half); len(got) > 0 {
			t.Errorf("the proxy's log holds %q of the token: %q", half, got)
		}
	}
	checkLogScrubbed(t, buf, secret)
}

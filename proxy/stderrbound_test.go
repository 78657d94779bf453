package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
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

// TestStderrPastBoundUnscrubbed: lines of a server's stderr past
// maxStderrBytes in a stderrWindow are counted and left out without
// being scrubbed: they reach no log, so looking for redacted values in
// them is CPU for nothing. Here the server's redacted values are locked
// away (their mutex held) once the bound is passed: a line that waits
// for them is being scrubbed. Every line was, before it was dropped.
func TestStderrPastBoundUnscrubbed(t *testing.T) {
	const secret = "sk-Unscrubbed/7+Q"
	var logs lockedBuf
	d := &downstream{p: &Proxy{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, cfg: ServerConfig{ID: "s"}}
	d.secrets.remember(appendSecrets(nil, secret))
	l := &lineLogger{d: d}
	line := []byte(fmt.Sprintf("a line of the server's, token=%s %s\n", secret, strings.Repeat("x", 40)))
	for written := 0; written <= 2*maxStderrBytes; written += len(line) {
		l.Write(line)
	}
	const past = 10000
	d.secrets.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range past {
			l.Write(line)
		}
	}()
	select {
	case <-done:
		d.secrets.mu.Unlock()
	case <-time.After(30 * time.Second):
		d.secrets.mu.Unlock()
		<-done
		t.Fatalf("%d lines past the bound waited for the redacted values: they were scrubbed before being left out", past)
	}
	l.end()
	if strings.Contains(logs.String(), secret) {
		t.Fatal("a logged line holds the redacted value")
	}
	if !strings.Contains(logs.String(), "lines of stderr left out") {
		t.Errorf("no line says lines were left out: %.300s", logs.String())
	}
}

// TestStderrRollKeepsContext: base64 of a redacted value that a window's
// start splits (its first lines left out past the bound, unscrubbed, the
// rest in the next window) is not logged in clear: the last lines left
// out are kept, and scrubbed with the lines that go on from them.
func TestStderrRollKeepsContext(t *testing.T) {
	const secret = "sk-RollContext/5+Zq"
	for off := 0; off < 57*3; off += 7 {
		var logs lockedBuf
		d := &downstream{p: &Proxy{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, cfg: ServerConfig{ID: "s"}}
		d.secrets.remember(appendSecrets(nil, secret))
		l := &lineLogger{d: d}
		for written := 0; written <= 2*maxStderrBytes; written += 100 {
			l.Write([]byte(strings.Repeat("y", 99) + "\n"))
		}
		data := append(bytes.Repeat([]byte{0xfb}, 57*2+off), secret...)
		data = append(data, bytes.Repeat([]byte{0xfb}, 57*3)...)
		lines := strings.Split(mimeWrap(base64.StdEncoding, data, "\n"), "\n")
		first, last := (57*2+off)*4/3/76, (57*2+off+len(secret))*4/3/76
		if first == last {
			continue // the value's base64 is in one line: no window's start splits it
		}
		split := first // the window starts after the line holding the value's start
		l.Write([]byte(strings.Join(lines[:split+1], "\n") + "\n"))
		l.mu.Lock()
		l.windowFrom = time.Time{} // the next window starts
		l.mu.Unlock()
		l.Write([]byte(strings.Join(lines[split+1:], "\n") + "\n# end\n"))
		l.end()
		if !strings.Contains(logs.String(), `"line":"# end"`) || !strings.Contains(logs.String(), "lines of stderr left out") {
			t.Fatalf("at %d: the window did not start anew after lines were left out: %.300s", off, logs.String())
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct{ Line string }
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Line == "" {
				continue
			}
			if rec.Line == lines[last] {
				t.Fatalf("at %d: the line holding the end of the value's base64 was logged as it came after the window's start: %q", off, rec.Line)
			}
		}
	}
}

package proxy

import (
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

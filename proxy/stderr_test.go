package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestStderrEndLogged: what a stdio server printed last on stderr is in
// the proxy's log once the proxy is closed, scrubbed: a line held for a
// line after it (it ends in a run of base64, and the server has a
// redacted value to find), when the proxy is closed while the server
// runs; a last line without a newline, base64 of a redacted value, when
// the server exits with it. The held line was logged half a second after
// it came, after the proxy's close, and the last line never.
func TestStderrEndLogged(t *testing.T) {
	const secret = "sk-Printed/18+Zx"
	held := "key: " + strings.Repeat("QUJD", 19)
	for _, tc := range []struct {
		name, text string
		exit       bool
		want       string
	}{
		{"held at close", held + "\n", false, held},
		{"unended at exit", "fatal: " + base64.StdEncoding.EncodeToString([]byte(secret)), true, "line=" + Redacted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf proctest.Buffer
			p := startProxy(t, newTestLog(t), []ServerConfig{leaksConfig(t, "lk")}, func(o *Options) { o.Logger = debugLogger(&buf) })
			cs := connectMemory(t, p, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lk__print", Arguments: map[string]any{"token": secret, "text": tc.text, "exit": tc.exit}})
			if !tc.exit && (err != nil || res.IsError) {
				t.Fatalf("print: %v %s", err, mustJSON(res))
			}
			p.Close()
			got := linesWith(&buf, "downstream stderr")
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("the server's last stderr %q is not in the proxy's log as %q: %q", tc.text, tc.want, got)
			}
			checkLogScrubbed(t, &buf, secret)
		})
	}
}

// stderrLines writes text to a lineLogger of a server whose calls held
// secret, cutting held blocks at limit bytes (0: maxHeldStderr), ends it
// as the server's exit does, and returns the lines it logged and its
// count of cuts short of the overlap they needed.
func stderrLines(t testing.TB, text, secret string, limit int) ([]string, int) {
	return stderrPaused(t, []string{text}, secret, limit)
}

// stderrPaused is stderrLines for a server that pauses after each of
// parts but the last for longer than heldStderrWait: there the wait's
// timer fires (wake, with the last line's time set far back, as after a
// real pause), before the next part is written.
func stderrPaused(t testing.TB, parts []string, secret string, limit int) ([]string, int) {
	var logs lockedBuf
	d := &downstream{p: &Proxy{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, cfg: ServerConfig{ID: "s"}}
	d.secrets.remember(appendSecrets(nil, secret))
	l := &lineLogger{d: d, limit: limit}
	for k, text := range parts {
		if k > 0 {
			l.mu.Lock()
			l.heldAt = time.Time{}
			l.mu.Unlock()
			l.wake()
		}
		for i := 0; i < len(text); i += 4096 { // as a pipe cuts it
			l.Write([]byte(text[i:min(i+4096, len(text))]))
		}
	}
	l.end()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Line string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		got = append(got, rec.Line)
	}
	return got, l.short
}

// TestStderrCutStraddle: a wrapped base64 block over maxHeldStderr bytes
// is logged in pieces, and base64 of a redacted value inside it, wherever
// it lies about the first cut (in the lines before it, across it, in the
// lines after), is in lines logged as [redacted], and nowhere in what is
// logged; the block's first line is logged as it came when the value is
// past the cut (the piece before it does not hold it).
// Across the cut the value's base64 was in neither piece whole, and was
// logged in two halves.
func TestStderrCutStraddle(t *testing.T) {
	const secret = "sk-Straddle/64+Kb"
	const width = 76
	cutLine := maxHeldStderr/width + 1 // the block's lines up to the first cut
	secrets := appendSecrets(nil, secret)
	for off := 57*(cutLine-2) + 5; off < 57*(cutLine+1); off += 11 {
		data := append(bytes.Repeat([]byte{0xfb}, off), secret...)
		data = append(data, bytes.Repeat([]byte{0xfb}, 57*20)...)
		lines := strings.Split(mimeWrap(base64.StdEncoding, data, "\n"), "\n")
		got, short := stderrLines(t, "begin\n"+strings.Join(lines, "\n")+"\nend\n", secret, 0)
		if len(got) != len(lines)+2 || short > 0 {
			t.Fatalf("at %d: %d lines logged, %d cuts short, want %d and none", off, len(got), short, len(lines)+2)
		}
		if first := off * 4 / 3 / width; first >= cutLine && got[1] != lines[0] {
			t.Errorf("at %d: the block's first line was logged as %q", off, got[1])
		}
		// The lines with the value's characters: 4/3 of its bytes.
		for i := off * 4 / 3 / width; i <= ((off+len(secret))*4/3)/width; i++ {
			if got[1+i] != Redacted {
				t.Errorf("at %d: line %d of the block (a cut after %d) holds base64 of the value, logged as %q", off, i, cutLine, got[1+i])
			}
		}
		if out := strings.Join(got, "\n"); scrub(out, secrets) == Redacted {
			t.Errorf("at %d: what was logged holds base64 of the value", off)
		}
	}
}

// FuzzStderrCut: a block of wrapped base64 holding a redacted value, its
// first line "Basic " and the block's first characters (first, if not
// 0: fewer than a line's, a short run, as a terminal wraps a header),
// cut into pieces of a few lines (limit) as a long block is cut at
// maxHeldStderr, and paused after the lines pauses marks (bit i%64 after
// line i) for longer than heldStderrWait: what is logged never holds the
// value's base64, and no cut or pause keeps fewer lines than the value
// needs with a limit above twice that.
func FuzzStderrCut(f *testing.F) {
	f.Add([]byte(strings.Repeat("\xfb\x00x", 200)), "hunter22-wrapped", uint16(300), uint8(60), false, false, uint64(0), uint8(0))
	f.Add([]byte(strings.Repeat("\xfb\x00x", 200)), "hunter22-wrapped", uint16(165), uint8(60), false, false, uint64(0), uint8(0)) // across the first cut
	f.Add([]byte(strings.Repeat("\xfbz", 90)), "s3cr3t", uint16(17), uint8(0), true, true, uint64(0), uint8(0))
	f.Add([]byte(strings.Repeat("\xfb\x00x", 200)), "hunter22-wrapped", uint16(300), uint8(60), false, false, ^uint64(0), uint8(0))   // a pause after each line
	f.Add([]byte(strings.Repeat("\xfb\x00x", 200)), "hunter22-wrapped", uint16(279), uint8(60), false, false, uint64(1<<4), uint8(0)) // a pause inside the value's base64
	f.Add([]byte(strings.Repeat("\xfbz", 90)), "s3cr3t", uint16(17), uint8(0), true, true, uint64(0x5555), uint8(0))
	f.Add([]byte(strings.Repeat("\xfb\x00x", 200)), "hunter22-wrapped", uint16(0), uint8(5), false, false, uint64(1), uint8(0)) // a pause after the value's core, before its last character
	wrapped := []byte(strings.Repeat("\xfb\x00x", 200))
	f.Add(wrapped, "user:hunter22-password", uint16(0), uint8(60), false, false, uint64(0), uint8(3)) // "Basic dXN", the rest on the next lines
	f.Add(wrapped, "user:hunter22-password", uint16(0), uint8(60), false, false, uint64(1), uint8(3))
	f.Add(wrapped, "user:hunter22-password", uint16(0), uint8(60), false, false, uint64(0), uint8(12))
	f.Add(wrapped, "user:hunter22-password", uint16(0), uint8(60), false, false, uint64(1), uint8(12))
	f.Add(wrapped, "user:hunter22-password", uint16(1), uint8(60), false, true, uint64(1), uint8(2)) // the character before the value's first in the first line
	f.Fuzz(func(t *testing.T, data []byte, secret string, at uint16, width uint8, url, indent bool, pauses uint64, first uint8) {
		if len(secret) < minSecretLen || strings.Contains(Redacted, secret) {
			return // a short value withholds whole lines; a part of [redacted] is one
		}
		pos := int(at) % (len(data) + 1)
		data = append(append(append([]byte(nil), data[:pos]...), secret...), data[pos:]...)
		enc := base64.StdEncoding
		if url {
			enc = base64.URLEncoding
		}
		w := minHeldRun + int(width)%64
		s := enc.EncodeToString(data)
		lines := []string{}
		if n := min(int(first)%minHeldRun, len(s)); n > 0 {
			lines, s = append(lines, "Basic "+s[:n]), s[n:]
		}
		for i := 0; i < len(s); i += w {
			line := s[i:min(i+w, len(s))]
			if indent && len(lines) > 0 {
				line = "    " + line
			}
			lines = append(lines, line)
		}
		var parts []string
		var b strings.Builder
		for i, line := range lines {
			b.WriteString(line + "\n")
			if pauses&(1<<(i%64)) != 0 {
				parts = append(parts, b.String())
				b.Reset()
			}
		}
		longest := 0 // of the forms the value is looked for in: escaped in JSON, "&" is 6 bytes
		for _, x := range appendSecrets(nil, secret) {
			longest = max(longest, len(x))
		}
		need := base64Span(longest)
		got, short := stderrPaused(t, append(parts, b.String()), secret, 2*need+2*w+16)
		if short > 0 {
			t.Fatalf("%d cuts or pauses kept fewer lines than the value needs", short)
		}
		// A log of one line, [redacted], holds nothing, but scrub returns
		// it as it is, the same as it returns a text holding the value.
		if out := strings.Join(got, "\n"); out != Redacted && scrub(out, appendSecrets(nil, secret)) == Redacted {
			t.Fatalf("what was logged holds base64 of %q: %q", secret, got)
		}
		// Nor any part of it: the lines logged as they came, read across
		// their breaks, hold no eight characters in a row of the value's
		// base64 (base64Cores); a pause leaves at most minUnfinished-1 of
		// them in clear. (The value's base64 but its last character did
		// not decode to it, and passed the check above.)
		var clear strings.Builder
		for _, line := range got {
			if line == Redacted {
				line = "|"
			}
			clear.WriteString(strings.TrimSpace(line))
		}
		var around strings.Builder // the other bytes' base64, at each offset: what they hold of it by chance does not count
		for k := range 3 {
			around.WriteString(enc.EncodeToString(append(make([]byte, k), data[:pos]...)) + "|")
			around.WriteString(enc.EncodeToString(append(make([]byte, k), data[pos+len(secret):]...)) + "|")
		}
		for _, c := range base64Cores(appendSecrets(nil, secret)) {
			for i := 0; i+8 <= len(c); i++ {
				if strings.Contains(clear.String(), c[i:i+8]) && !strings.Contains(around.String(), c[i:i+8]) {
					t.Fatalf("what was logged holds %q of the base64 of %q: %q", c[i:i+8], secret, got)
				}
			}
		}
	})
}

// TestStderrLongLineLeftOut: a line of more than 64 KiB that comes
// without its end is left out whole, and said to be: its first 64 KiB
// were dropped and the rest logged as a line of its own, so a redacted
// value across the drop had its end logged, which no scrub finds. The
// lines after it are logged.
func TestStderrLongLineLeftOut(t *testing.T) {
	const secret = "sk-Truncated/99+Xy"
	for _, at := range []int{65536 - 9, 69632 - 9, 69632 + 100} { // about the first and second writes over 64 KiB
		text := strings.Repeat(".", at) + secret + strings.Repeat(".", 5000) + " end\nnext line\n"
		got, _ := stderrLines(t, text, secret, 0)
		if want := []string{longStderrLine, "next line"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("at %d: logged %.200q, want %q", at, got, want)
		}
	}
	// Unended when the server exits: left out as well.
	got, _ := stderrLines(t, strings.Repeat(".", 69632-9)+secret, secret, 0)
	if len(got) != 1 || got[0] != longStderrLine {
		t.Errorf("an unended long last line: logged %.200q", got)
	}
}

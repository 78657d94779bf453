package proxy

import (
	"bytes"
	"encoding/base64"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// lineLogger passes a stdio server's stderr to the proxy's log at debug
// level, with the redacted values of the server's latest calls scrubbed
// out (a server that prints its arguments would otherwise put them in the
// sidecar's log). Lines that may go on with one run of base64 (PEM's and
// MIME's lines: one that ends in a long run, the next starting with a
// base64 character after its indentation) are held and scrubbed as one
// text, so that base64 of a redacted value broken over them is found;
// they are logged when a line that does not go on with them comes, when
// they reach maxHeldStderr bytes, after heldStderrWait without another
// line, or when the server's stderr ends (endProcess). Nothing is held
// while the server has no redacted value to find.
type lineLogger struct {
	d      *downstream
	mu     sync.Mutex
	buf    []byte
	held   []string
	size   int         // of held
	heldAt time.Time   // when the last of held came
	timer  *time.Timer // logs held lines heldStderrWait after heldAt
}

const (
	maxHeldStderr  = 64 << 10
	heldStderrWait = 500 * time.Millisecond
	// minHeldRun is the shortest run of base64 at a line's end that holds
	// it: a wrapped line's is a line's width; a word is shorter.
	minHeldRun = 16
)

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

// end logs what l still has once the server's stderr ended: the held
// lines, which no line or wait after them would log once the proxy is
// closed, and a last line without a newline, which nothing else logs.
func (l *lineLogger) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.line(string(l.buf))
		l.buf = l.buf[:0]
	}
	l.logHeld()
}

// endProcess kills what is left of a stdio server's process group once
// its session is closed, and logs what its stderr's lineLogger still has
// (end). Closing the session waited for the process, and so for its
// stderr to be read to the end; if the process would not be waited for,
// what comes after is logged as it comes, held lines after the wait.
func endProcess(cmd *exec.Cmd) {
	killProcessGroup(cmd)
	if cmd == nil {
		return
	}
	if l, ok := cmd.Stderr.(*lineLogger); ok {
		l.end()
	}
}

// line logs s, or holds it with the lines it goes on with.
func (l *lineLogger) line(s string) {
	if len(l.held) > 0 && !startsBase64Run(s) {
		l.logHeld()
	}
	// With no redacted value to find (no redaction configured, or no call
	// yet), a line is logged as it comes: holding it would only delay it.
	if len(l.held) == 0 && (!endsBase64Run(s) || l.d.secrets.none()) {
		l.log(l.d.secrets.scrub(s))
		return
	}
	l.held, l.size, l.heldAt = append(l.held, s), l.size+len(s), time.Now()
	if !endsBase64Run(s) || l.size > maxHeldStderr {
		l.logHeld()
		return
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(heldStderrWait, l.wake)
	} else {
		l.timer.Reset(heldStderrWait)
	}
}

// wake logs the held lines once heldStderrWait passed since the last came
// (the timer may fire as a line comes, which reset it too late).
func (l *lineLogger) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if wait := heldStderrWait - time.Since(l.heldAt); len(l.held) > 0 && wait > 0 {
		l.timer.Reset(wait)
		return
	}
	l.logHeld()
}

// logHeld logs the held lines: each as [redacted] if they hold base64 of
// a redacted value together, else each scrubbed.
func (l *lineLogger) logHeld() {
	whole := len(l.held) > 0 && l.d.secrets.scrub(strings.Join(l.held, "\n")) == Redacted
	for _, s := range l.held {
		if whole {
			s = Redacted
		} else {
			s = l.d.secrets.scrub(s)
		}
		l.log(s)
	}
	l.held, l.size = l.held[:0], 0
	if l.timer != nil {
		l.timer.Stop()
	}
}

func (l *lineLogger) log(line string) {
	l.d.p.logger.Debug("proxy: downstream stderr", "server", l.d.cfg.ID, "line", line)
}

// endsBase64Run reports whether s ends in minHeldRun characters of a
// base64 alphabet (trailing spaces and a CR aside); startsBase64Run
// whether s starts with one after its indentation.
func endsBase64Run(s string) bool {
	s = strings.TrimRight(s, " \t\r")
	n := 0
	for n < len(s) && n < minHeldRun && isBase64Char(s[len(s)-1-n]) {
		n++
	}
	return n == minHeldRun
}

func startsBase64Run(s string) bool {
	s = strings.TrimLeft(s, " \t")
	return s != "" && isBase64Char(s[0])
}

// isBase64Char reports whether c is a character of an alphabet of
// base64Alphabets.
func isBase64Char(c byte) bool {
	return inBase64Run(c, base64.StdEncoding) || inBase64Run(c, base64.URLEncoding)
}

var _ io.Writer = (*lineLogger)(nil)

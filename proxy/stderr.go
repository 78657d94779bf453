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
// they are logged when a line that does not go on with them comes, after
// heldStderrWait without another line, or when the server's stderr ends
// (endProcess). Nothing is held while the server has no redacted value to
// find.
//
// A held block is logged in pieces of about maxHeldStderr bytes, so that
// a server printing base64 without end is neither held nor scanned
// without bound. At each cut the last lines stay held, scrubbed again
// with the piece after them (cut): base64 of a redacted value that
// straddles the cut is then whole in one of the two pieces, and every
// line it touches is logged as [redacted].
type lineLogger struct {
	d *downstream
	// limit is the bytes of held lines that make a cut, and the most the
	// lines kept at a cut may have (0: maxHeldStderr).
	limit int

	mu     sync.Mutex
	buf    []byte
	long   bool // the rest of buf's line is left out (maxStderrLine)
	held   []string
	size   int         // of held lines after those a cut kept
	sure   int         // held[:sure] are logged as [redacted]: the piece a cut logged before them held a redacted value
	short  int         // cuts that kept fewer lines than the longest value's base64 needs (overlap)
	heldAt time.Time   // when the last of held came
	timer  *time.Timer // logs held lines heldStderrWait after heldAt
}

const (
	maxHeldStderr  = 64 << 10
	heldStderrWait = 500 * time.Millisecond
	// minHeldRun is the shortest run of base64 at a line's end that holds
	// it: a wrapped line's is a line's width; a word is shorter.
	minHeldRun = 16
	// maxStderrLine bounds a line held before its end comes; a longer
	// one is left out whole, and longStderrLine logged in its place.
	maxStderrLine  = 64 << 10
	longStderrLine = "[a line of more than 64 KiB, left out]"
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
		if l.long {
			l.long = false // the end of a line left out
		} else {
			l.line(string(l.buf[:i]))
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxStderrLine {
		// Left out whole: a piece of it logged alone may hold a part of
		// a redacted value, which no scrub finds.
		if !l.long {
			l.line(longStderrLine)
		}
		l.buf, l.long = l.buf[:0], true
	}
	return len(p), nil
}

// end logs what l still has once the server's stderr ended: the held
// lines, which no line or wait after them would log once the proxy is
// closed, and a last line without a newline, which nothing else logs.
func (l *lineLogger) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 && !l.long {
		l.line(string(l.buf))
	}
	l.buf, l.long = l.buf[:0], false
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
	if !endsBase64Run(s) {
		l.logHeld()
		return
	}
	if l.size > l.max() {
		l.cut()
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
	if len(l.held) > 0 {
		l.logFirst(len(l.held), l.holdsSecret())
	}
	l.held, l.size, l.sure = l.held[:0], 0, 0
	if l.timer != nil {
		l.timer.Stop()
	}
}

// cut logs the held lines but the last (overlap), which stay held, to be
// scrubbed again with the lines after them. Those are the ones that any
// base64 of a redacted value starting before them ends in, so such base64
// is whole in this piece or the next; if this piece holds some, the kept
// lines are logged as [redacted] too, whatever the next holds. The kept
// lines are at most limit bytes, fewer than the piece's new ones, so
// each byte is scanned at most twice: l is linear in what the server
// prints.
func (l *lineLogger) cut() {
	whole := l.holdsSecret()
	keep := l.overlap()
	n := len(l.held) - keep
	l.logFirst(n, whole)
	if whole {
		l.sure = keep
	} else {
		l.sure = max(0, l.sure-n)
	}
	l.held = append(l.held[:0], l.held[n:]...)
	l.size = 0
}

// overlap returns how many of the last held lines a cut keeps: the fewest
// whose base64 characters are as many as base64 of the longest redacted
// value spans, but no more than limit bytes of lines. A value whose
// base64 needs more (one of about three quarters of limit, 48 KiB, or
// longer, or lines padded with other characters) may straddle the cut
// unseen; short counts those cuts.
func (l *lineLogger) overlap() int {
	need := base64Span(l.d.secrets.longest())
	chars, size := 0, 0
	for i := len(l.held) - 1; i >= 0; i-- {
		if chars >= need {
			return len(l.held) - 1 - i
		}
		if size += len(l.held[i]); size > l.max() {
			l.short++
			return len(l.held) - 1 - i
		}
		for j := 0; j < len(l.held[i]); j++ {
			if isBase64Char(l.held[i][j]) {
				chars++
			}
		}
	}
	return len(l.held) // not reached: the new lines alone are over limit bytes
}

// base64Span is the most characters base64 of n bytes spans in a longer
// text: whole groups of four, one more group if the bytes start inside
// one.
func base64Span(n int) int { return 4 * ((n + 4) / 3) }

// holdsSecret reports whether the held lines hold base64 of a redacted
// value together.
func (l *lineLogger) holdsSecret() bool {
	return l.d.secrets.scrub(strings.Join(l.held, "\n")) == Redacted
}

// logFirst logs the first n held lines: as [redacted] if redacted or a
// cut found them in a piece holding a redacted value (sure), else each
// scrubbed.
func (l *lineLogger) logFirst(n int, redacted bool) {
	for i, s := range l.held[:n] {
		if redacted || i < l.sure {
			s = Redacted
		} else {
			s = l.d.secrets.scrub(s)
		}
		l.log(s)
	}
}

func (l *lineLogger) log(line string) {
	l.d.p.logger.Debug("proxy: downstream stderr", "server", l.d.cfg.ID, "line", line)
}

func (l *lineLogger) max() int {
	if l.limit > 0 {
		return l.limit
	}
	return maxHeldStderr
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

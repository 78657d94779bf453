package proxy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// lineLogger passes a stdio server's stderr to the proxy's log at debug
// level, with the redacted values of the server's latest calls scrubbed
// out (a server that prints its arguments would otherwise put them in the
// sidecar's log). Lines that may go on with one run of base64 (PEM's and
// MIME's lines: one that ends in a long run, or in the first characters
// of a redacted value's base64, "Basic dXNlcjpo" wrapped at a terminal's
// width; the next starting with a base64 character after its
// indentation) are held and scrubbed as one text, so that base64 of a
// redacted value broken over them is found, and a value itself that a
// break splits (wrapped); they are logged when a line
// that does not go on with them comes, after heldStderrWait without
// another line, or when the server's stderr ends (endProcess). The end of
// the run the last line logged ends in is kept (keepEnd), so that a line
// going on with the few characters of a value's base64 it ends in is
// found too. Nothing is held or kept while the server has no redacted
// value to find.
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
	logged int         // held[:logged] were logged at a pause, and are kept to be scrubbed with what goes on from them
	size   int         // of held lines after those a cut or a pause kept
	sure   int         // held[:sure] are logged as [redacted]: the piece a cut logged before them held a redacted value
	short  int         // cuts and pauses that kept fewer lines than the longest value's base64 needs (overlap)
	pi     []int32     // unfinishedIn's prefix function, kept for the next pause
	heldAt time.Time   // when the last of held came
	timer  *time.Timer // logs held lines heldStderrWait after heldAt

	// The bound on what is logged: bytes logged in the window from
	// windowFrom, and the lines and bytes left out of it.
	windowFrom         time.Time
	spent              int
	outLines, outBytes int
	closed             bool // pastBound left lines out of this window
	outHeld            int  // bytes of the held lines when closed
}

const (
	maxHeldStderr  = 64 << 10
	heldStderrWait = 500 * time.Millisecond
	// minHeldRun is the shortest run of base64 at a line's end that holds
	// it: a wrapped line's is a line's width; a word is shorter.
	minHeldRun = 16
	// minUnfinished is the fewest first characters of a redacted value's
	// base64 (those all of whose bits are the value's, base64Cores) that
	// a run before a pause must end in for the lines holding them to be
	// logged as [redacted], and a line's run for it to be held (line).
	// Fewer would match too often by chance: a
	// run's last three characters are the first three of one of the up to
	// 1536 cores of 256 values about once in 170 pauses, its last four
	// once in 11 000 (a line so held by chance waits for the next, and
	// one a pause follows is logged as [redacted]); and what is left in
	// clear under it, three characters (18 bits of the value, with at
	// most 4 more in the character before them), does not give the value
	// away. The rest of the value is found with its start however short
	// it is (pause, keepEnd).
	minUnfinished = 4
	// maxStderrLine bounds a line held before its end comes; a longer
	// one is left out whole, and longStderrLine logged in its place.
	maxStderrLine  = 64 << 10
	longStderrLine = "[a line of more than 64 KiB, left out]"
	// maxStderrBytes is the most of a server's stderr (scrubbed) logged
	// in a stderrWindow: a server printing without end filled the
	// sidecar's log (100 MB of stderr became 189 MB of it). The lines
	// past it are left out, and counted in a line logged in their place
	// (leftOut) once the next window starts or the stderr ends.
	maxStderrBytes = 1 << 20
	stderrWindow   = time.Minute
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
	l.leftOut()
}

// endProcess kills what is left of a stdio server's process group once
// its session is closed, and logs what its stderr's lineLogger still has
// (end). Closing the session waited for the process, and so for its
// stderr to be read to the end; if the process would not be waited for,
// what comes after is logged as it comes, held lines after the wait.
func endProcess(cmd *process) {
	killProcessGroup(cmd)
	if cmd == nil {
		return
	}
	if l, ok := cmd.Stderr.(*lineLogger); ok {
		l.end()
	}
}

// line logs s, or holds it with the lines it goes on with: those that
// end in a long run of base64 (endsBase64Run) or in the start of a
// redacted value's (unfinished), read across the lines before.
func (l *lineLogger) line(s string) {
	if l.pastBound(s) {
		return
	}
	if len(l.held) > 0 && !startsBase64Run(s) {
		l.logHeld()
	}
	// With no redacted value to find (no redaction configured, or no call
	// yet), a line is logged as it comes: holding it would only delay it.
	if l.d.secrets.none() {
		l.log(s)
		return
	}
	if len(l.held) == 0 && !endsBase64Run(s) && l.unfinished([]string{s}) == 0 {
		l.log(l.d.secrets.scrub(s))
		l.keepEnd(runEnd([]string{s}))
		return
	}
	l.held, l.size, l.heldAt = append(l.held, s), l.size+len(s), time.Now()
	if !endsBase64Run(s) && l.unfinished(l.held) == 0 {
		end := runEnd(l.held)
		l.logHeld()
		l.keepEnd(end)
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
	if wait := heldStderrWait - time.Since(l.heldAt); len(l.held) > l.logged && wait > 0 {
		l.timer.Reset(wait)
		return
	}
	l.pause()
}

// pause logs the held lines, which the server may go on with after the
// wait: as logHeld does, but the last lines that hold the start of a
// redacted value's base64 (unfinished) are logged as [redacted], and the
// lines a cut would keep (overlap) stay held, as logged, to be scrubbed
// again with the lines that go on from them. A value's base64 that the
// pause splits is whole in those and the next lines, and found there;
// the lines after the pause are then logged as [redacted] as a block
// holding it whole is, however few of its characters they hold.
func (l *lineLogger) pause() {
	if len(l.held) == l.logged {
		return // nothing came since the last pause
	}
	n := len(l.held)
	l.logFirst(n, l.holdsSecret(), n-l.unfinished(l.held))
	keep := l.overlap()
	l.held = append(l.held[:0], l.held[n-keep:]...)
	l.logged, l.size, l.sure = keep, 0, 0
}

// logHeld logs the held lines: each as [redacted] if they hold base64 of
// a redacted value together, else each scrubbed. No line can go on with
// them after this.
func (l *lineLogger) logHeld() {
	if n := len(l.held); n > l.logged {
		l.logFirst(n, l.holdsSecret(), n)
	}
	l.held, l.logged, l.size, l.sure = l.held[:0], 0, 0, 0
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
// prints. (The lines a pause kept are scanned once more with the lines
// after it: at most limit bytes once per heldStderrWait.)
func (l *lineLogger) cut() {
	whole := l.holdsSecret()
	keep := l.overlap()
	n := len(l.held) - keep
	l.logFirst(n, whole, n)
	if whole {
		l.sure = keep
	} else {
		l.sure = max(0, l.sure-n)
	}
	l.held = append(l.held[:0], l.held[n:]...)
	l.logged = max(0, l.logged-n) // none are left: the new lines are more bytes than those kept
	l.size = 0
}

// overlap returns how many of the last held lines a cut or a pause
// keeps: the fewest whose base64 characters are as many as base64 of the
// longest redacted value spans, but no more than limit bytes of lines. A value whose
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
	// Only at a pause: fewer characters than need came. (A cut's new
	// lines alone are over limit bytes.)
	return len(l.held)
}

// base64Span is the most characters base64 of n bytes spans in a longer
// text: whole groups of four, one more group if the bytes start inside
// one.
func base64Span(n int) int { return 4 * ((n + 4) / 3) }

// holdsSecret reports whether the held lines hold base64 of a redacted
// value together, or a value itself across their breaks (wrapped).
func (l *lineLogger) holdsSecret() bool {
	text := strings.Join(l.held, "\n")
	return l.d.secrets.scrub(text) == Redacted || l.d.secrets.wrapped(text)
}

// wrapped reports whether text holds one of r's values (of at least
// minSecretLen bytes) across a line break: more of it read with its
// breaks unwrapped, as it is or escaped (as scrub reads base64), than as
// it is. scrub cuts a value out of a line that holds it; one that a break
// splits is in no line whole. It is linear in text for each value, as
// scrub is.
func (r *recentSecrets) wrapped(text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines, escaped := unwrap(text, false), unwrap(text, true)
	for _, x := range r.list {
		if len(x) < minSecretLen {
			continue
		}
		n := strings.Count(text, x)
		if strings.Count(lines, x) > n || len(escaped) != len(lines) && strings.Count(escaped, x) > n {
			return true
		}
	}
	return false
}

// unfinished returns how many of the last of held lines hold the start
// of a redacted value's base64 that the run they end in may go on with
// in the next line or after a pause: the run's longest end, at least minUnfinished characters, that
// is the first characters of a value's base64, or all of them
// (base64Cores; the character after them may hold the value's last bits
// and come after the pause), and the character before it, which holds
// bits of the value's first byte. The run is read as scrub reads
// it: its lines unwrapped, and once more with their escaped line breaks
// unwrapped too. It reads the lines back only as far as the longest
// core's length of the run (and the line the run starts in), and each
// core once: a pause, or a line not ending in a long run, costs as much
// however much the server printed.
func (l *lineLogger) unfinished(held []string) int {
	cores := l.d.secrets.coresNow()
	longest := 0
	for _, c := range cores {
		longest = max(longest, len(c))
	}
	lines := 0
	for _, escaped := range []bool{false, true} {
		run, parts, backslash := trailingRun(held, longest+1, escaped) // and the character before a core
		if escaped && !backslash {
			break // no break is escaped: the run is the one read as it is
		}
		if len(run) < minUnfinished {
			continue
		}
		p := 0
		for _, c := range cores {
			p = max(p, l.unfinishedIn(run, c))
		}
		if p < minUnfinished {
			continue
		}
		// The lines whose parts hold the run's last p+1 characters.
		need, n := min(p+1, len(run)), 0
		for n < len(parts) && need > 0 {
			need -= parts[n]
			n++
		}
		lines = max(lines, n)
	}
	return lines
}

// trailingRun returns the last characters (at least want, if there are
// as many) of the run of base64 characters that lines end in, read
// across their breaks and the indentation after them, and each line's
// part of them, the last line's first, and whether a line it read holds
// a backslash. If escaped, each line is read with its escaped breaks
// unwrapped (unwrap). A line's spaces and CR before its break are passed
// over, which joins more than scrub does: what may go on is redacted the
// more readily.
func trailingRun(lines []string, want int, escaped bool) (string, []int, bool) {
	var pieces []string
	var parts []int
	got, backslash := 0, false
	for i := len(lines) - 1; i >= 0 && got < want; i-- {
		s := lines[i]
		backslash = backslash || strings.Contains(s, `\`)
		if escaped {
			s = unwrap(s, true)
		}
		s = strings.TrimRight(s, " \t\r")
		k := 0
		for k < len(s) && isBase64Char(s[len(s)-1-k]) {
			k++
		}
		pieces, parts = append(pieces, s[len(s)-k:]), append(parts, k)
		got += k
		if k < len(strings.TrimLeft(s, " \t")) {
			break // the run starts in this line
		}
	}
	slices.Reverse(pieces)
	run := strings.Join(pieces, "")
	return run[max(0, len(run)-want):], parts, backslash
}

// unfinishedIn returns the length of run's longest end that is the
// first characters of core, or all of it (a value whose last character
// holds bits of the byte after it too: that one may come after the
// pause): Knuth, Morris and Pratt's matcher of core's first characters
// run over run's last ones, linear in core's length. The prefix
// function's space is kept in l.
func (l *lineLogger) unfinishedIn(run, core string) int {
	w := run[max(0, len(run)-len(core)):]
	if len(w) < minUnfinished || !strings.Contains(w, core[:minUnfinished]) {
		return 0 // no end of minUnfinished or more characters is core's start
	}
	pat := core[:len(w)]
	pi := l.pi[:0]
	for i, k := 0, int32(0); i < len(pat); i++ {
		for k > 0 && pat[i] != pat[k] {
			k = pi[k-1]
		}
		if i > 0 && pat[i] == pat[k] {
			k++
		}
		pi = append(pi, k)
	}
	l.pi = pi
	q := int32(0) // the longest end of w read so far that is pat's start
	for i := 0; i < len(w); i++ {
		for q > 0 && (int(q) == len(pat) || pat[q] != w[i]) {
			q = pi[q-1]
		}
		if pat[q] == w[i] {
			q++
		}
	}
	return int(q)
}

// keepEnd keeps end, the end of the run of base64 the lines just logged
// end in (runEnd), held as logged, as a pause keeps lines: the next line,
// if it starts with base64, is scrubbed with it (logHeld), and is logged
// as [redacted] if it holds the rest of a value's base64 that starts in
// end. A line not held ends in fewer than minUnfinished characters of a
// value's base64 (unfinished), which are logged as they came; what comes
// after them is not.
func (l *lineLogger) keepEnd(end []string) {
	l.held = append(l.held[:0], end...)
	l.logged = len(end)
}

// runEnd returns the ends of lines that hold the last minUnfinished+2
// characters of the run of base64 they end in, read as it is and with
// escaped breaks unwrapped (as unfinished reads it), or all of it if it
// is shorter, the first line's first; nil if lines end in none. Those
// are the fewer than minUnfinished characters of a value's base64 a line
// not held may end in, and the three before them, which hold the first
// bits of its first byte and the start of their group of four: scrub
// decodes the run that goes on from them from that group. It passes
// backslashes, spaces, tabs and CRs, and a letter after a backslash, as
// if they were a break's, and reads as many characters back as it keeps:
// each line is read once, and its end kept at most its length.
func runEnd(lines []string) []string {
	const want = minUnfinished + 2
	var end []string
	got := 0
	for i := len(lines) - 1; i >= 0 && got < want; i-- {
		s := lines[i]
		j := len(s)
	read:
		for j > 0 && got < want {
			switch c := s[j-1]; {
			case j > 1 && s[j-2] == '\\' && (c == 'n' || c == 'r' || c == 't'):
				j -= 2
			case isBase64Char(c):
				got++
				j--
			case c == '\\' || c == ' ' || c == '\t' || c == '\r':
				j--
			default:
				break read
			}
		}
		if got == 0 {
			return nil
		}
		if j < len(s) {
			end = append(end, strings.Clone(s[j:]))
		}
		if j > 0 {
			break // the run starts in this line
		}
	}
	slices.Reverse(end)
	return end
}

// coresNow returns the base64 cores of r's values (base64Cores), made
// once for the lines between two calls, as scrub makes them.
func (r *recentSecrets) coresNow() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return nil
	}
	if r.cores == nil {
		r.cores = newCoreSet(base64Cores(r.list))
	}
	return r.cores.cores
}

// logFirst logs the first n held lines but those a pause logged: as
// [redacted] if redacted, if a cut found them in a piece holding a
// redacted value (sure), or from the line from on (unfinished); else each
// scrubbed.
func (l *lineLogger) logFirst(n int, redacted bool, from int) {
	for i := l.logged; i < n; i++ {
		s := l.held[i]
		if redacted || i < l.sure || i >= from {
			s = Redacted
		} else {
			s = l.d.secrets.scrub(s)
		}
		l.log(s)
	}
}

// pastBound reports whether s is past the window's bound: once one line
// is, every line after it in the window is left out, counted and never
// scrubbed (each would be scrubbed only to be dropped: 100 MiB of a
// server's stderr past the bound cost 7 s of CPU). Held lines not yet
// logged are left out with it. The last lines left out are kept as
// logged (as a pause keeps them, at most max bytes), so that the first
// lines of the next window that go on with their run of base64 are
// scrubbed with them, and a value's base64 that a window's start splits
// is found whole.
func (l *lineLogger) pastBound(s string) bool {
	l.roll()
	if l.outLines == 0 && l.spent+len(s) <= maxStderrBytes {
		return false
	}
	if !l.closed {
		// The first line left out here: the held lines are kept as
		// logged, those not yet logged counted as left out.
		l.closed, l.outHeld = true, 0
		for i, h := range l.held {
			if i >= l.logged {
				l.outLines++
				l.outBytes += len(h)
			}
			l.outHeld += len(h)
		}
	}
	l.outLines++
	l.outBytes += len(s)
	if !startsBase64Run(s) {
		l.held, l.outHeld = l.held[:0], 0
	}
	l.held, l.outHeld = append(l.held, s), l.outHeld+len(s)
	for len(l.held) > 1 && l.outHeld > l.max() {
		l.outHeld -= len(l.held[0])
		l.held = l.held[1:]
	}
	l.logged, l.size, l.sure = len(l.held), 0, 0
	if l.timer != nil {
		l.timer.Stop()
	}
	return true
}

// roll starts a new window once the last has passed, logging how many
// lines the bound left out of it.
func (l *lineLogger) roll() {
	if now := time.Now(); now.Sub(l.windowFrom) >= stderrWindow {
		l.leftOut()
		l.windowFrom, l.spent, l.closed = now, 0, false
	}
}

func (l *lineLogger) log(line string) {
	if len(l.d.creds) > 0 {
		line = scrubText(line, l.d.credCores, l.d.creds) // a server that prints its configured credentials
	}
	l.roll()
	if l.spent+len(line) > maxStderrBytes {
		l.outLines++
		l.outBytes += len(line)
		return
	}
	l.spent += len(line)
	l.emit(line)
}

// leftOut logs how many lines the bound left out since it last did.
func (l *lineLogger) leftOut() {
	if l.outLines > 0 {
		l.emit(fmt.Sprintf("[%d lines of stderr left out, %d bytes: more than %d MiB in %s]", l.outLines, l.outBytes, maxStderrBytes>>20, stderrWindow))
	}
	l.outLines, l.outBytes = 0, 0
}

func (l *lineLogger) emit(line string) {
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

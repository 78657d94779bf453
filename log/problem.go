package log

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A Problem is one part of what a check read that is wrong, and why: a
// file of a bundle or an evidence directory, an entry or a checkpoint of
// a log, an anchor record's token, a task request. Every check in provlog
// reports problems in this shape: [Audit], anchor verification, bundle and
// evidence verification, and the task rules (a refused request, an entry
// that breaks a rule). Its String form, "part: why", is what people read;
// its JSON form is what --json prints.
type Problem struct {
	Part string `json:"part"`
	// Rule names the rule the part breaks where the check is a set of
	// named rules (the task rules, opp's Rule constants); else it is empty.
	Rule string `json:"rule,omitempty"`
	Msg  string `json:"problem"`
}

// ProblemOf is the problem err describes in part, on one line (some
// errors, merkle's proof checks among them, span lines).
func ProblemOf(part string, err error) Problem {
	return Problem{Part: part, Msg: strings.Join(strings.Fields(err.Error()), " ")}
}

// String is the problem as people read it, through [Printable]: a part
// or a message can quote what a hostile log, bundle or evidence directory
// holds (a file name, an actor), and printed raw that would act on the
// reader's terminal.
func (p Problem) String() string { return Printable(p.Part + ": " + p.Msg) }

// Printable is s made safe to print on one line of a terminal, for text
// from a source the reader does not trust (a log, a bundle, an evidence
// directory, an MCP server): every character [Invisible] names (C0 and C1
// controls with ESC, CR, LF and DEL among them, bidirectional and other
// format characters, separators, unassigned code points) and every byte
// that is not UTF-8 is escaped as strconv.Quote would escape it (\n,
// \x1b, \u202e, \U000e0041), so that no escape sequence, carriage return,
// new line or reordering reaches the terminal. A backslash that would
// read as the start of such an escape is written \\ ([readsAsEscape]).
// The rest is left as it is, quotes and other backslashes too: a reader
// sees the text, not a Go literal.
// Every command that prints such text prints it through this one
// function.
func Printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' && readsAsEscape(s[i+1:]):
			b.WriteString(`\\`)
		case Invisible(r) == "":
			b.WriteString(s[i : i+n])
		default:
			b.WriteString(escapeRune(r))
		}
		i += n
	}
	return b.String()
}

// readsAsEscape reports whether a backslash followed by rest would read
// as the start of an escape Printable writes: the next character is one
// an escape begins with (\\, \a, \x, \u and the others), or is itself
// escaped. Such a backslash is written \\, so that text holding a
// typed "\x1b" is not read as text holding ESC; every other backslash is
// left as it is.
func readsAsEscape(rest string) bool {
	if rest == "" {
		return false
	}
	switch rest[0] {
	case '\\', 'a', 'b', 'f', 'n', 'r', 't', 'v', 'x', 'u', 'U':
		return true
	}
	r, n := utf8.DecodeRuneInString(rest)
	return r == utf8.RuneError && n <= 1 || Invisible(r) != ""
}

// escapeRune is r as strconv.QuoteRune writes it, less the quotes.
func escapeRune(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	switch {
	case r < ' ' || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	case r < 0x10000:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// A ProblemsError is the error of a check that found problems: every one
// of them, in the order found. What names the thing checked ("bundle",
// "evidence", "log", "anchor record"). A check that could not read what it
// checks returns another error: it found nothing wrong, it could not look.
type ProblemsError struct {
	What     string    `json:"what"`
	Problems []Problem `json:"problems"`
	// More counts the problems found past the first [MaxProblems], which
	// a check that reads untrusted files does not keep.
	More int `json:"more,omitempty"`
}

// MaxProblems is how many problems a check of untrusted files keeps and
// how many the checking commands print: a forged file can hold a problem
// a line, and an auditor needs the first ones and how many there were.
const MaxProblems = 100

// Count is how many problems the check found: those kept and More.
func (e *ProblemsError) Count() int { return len(e.Problems) + e.More }

func (e *ProblemsError) Error() string {
	kept := e.Problems[:min(len(e.Problems), MaxProblems)]
	s := make([]string, len(kept))
	for i, p := range kept {
		s[i] = p.String()
	}
	if n := e.Count() - len(kept); n > 0 {
		s = append(s, fmt.Sprintf("and %d more", n))
	}
	n := "problems"
	if e.Count() == 1 {
		n = "problem"
	}
	return fmt.Sprintf("%s does not verify (%d %s): %s", e.What, e.Count(), n, strings.Join(s, "; "))
}

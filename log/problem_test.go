package log_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/provlog/provlog/log"
)

// TestPrintable holds the one cleaner every command prints untrusted text
// through: what would act on a terminal (escape sequences, new lines,
// carriage returns, bidirectional overrides, bytes that are not UTF-8) is
// escaped as strconv would write it; a backslash that would read as the
// start of such an escape is doubled, so a typed "\x1b" is not taken for
// ESC; everything else, other scripts, quotes and other backslashes
// included, is left as it is.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"alice":                              "alice",
		`say "hi" \ bye`:                     `say "hi" \ bye`,
		"Zoë 東京 ✓":                           "Zoë 東京 ✓",
		"mallory\x1b]0;audit passed\x07":     `mallory\x1b]0;audit passed\a`,
		"a\nOK: fake\r\tb":                   `a\nOK: fake\r\tb`,
		"x\x00\x7f\u0085\u009b":              `x\x00\x7f\u0085\u009b`,
		"evil\u202egnp.exe\u200b\ufeff":      `evil\u202egnp.exe\u200b\ufeff`,
		"tag\U000e0041 line\u2028para\u2029": `tag\U000e0041 line\u2028para\u2029`,
		"bad\xff\xc0utf8":                    `bad\xff\xc0utf8`,
		"origin\x1b]8;;https://evil.example/\x1b\\": `origin\x1b]8;;https://evil.example/\x1b\`,
		`mallory\x1b]0;typed`:                       `mallory\\x1b]0;typed`,
		`C:\path\new \\share \u202e`:                `C:\path\\new \\\share \\u202e`,
		"a\\\x1b":                                   `a\\\x1b`,
		"a\\\xff":                                   `a\\\xff`,
	} {
		if got := log.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProblemStringPrintable: a problem's part or message can quote what a
// hostile bundle holds (a file's name); its String form, which every
// command prints, holds no control character of it.
func TestProblemStringPrintable(t *testing.T) {
	p := log.Problem{Part: "notes\x1b[2K\nOK: fine", Msg: "is not listed in manifest.json"}
	s := p.String()
	if strings.ContainsAny(s, "\x1b\n") {
		t.Errorf("Problem.String = %q: holds the part's control characters", s)
	}
	e := &log.ProblemsError{What: "bundle", Problems: []log.Problem{p}}
	if strings.ContainsAny(e.Error(), "\x1b\n") {
		t.Errorf("ProblemsError.Error = %q: holds the part's control characters", e.Error())
	}
}

// FuzzPrintable: Printable's output holds no character that acts on a
// terminal or does not show, and reads back as exactly its input, so no
// two texts print alike (a typed "\x1b" and ESC among them).
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "alice", `a\x1b`, "a\x1b", `\\`, "\\\xff", `C:\new\path`, "\u202e\\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := log.Printable(s)
		if !utf8.ValidString(p) {
			t.Fatalf("Printable(%q) = %q: not UTF-8", s, p)
		}
		for _, r := range p {
			if log.Invisible(r) != "" {
				t.Fatalf("Printable(%q) = %q: holds U+%04X", s, p, r)
			}
		}
		if back := unprint(t, p); back != s {
			t.Fatalf("Printable(%q) = %q reads back as %q", s, p, back)
		}
	})
}

// unprint reads Printable's output back: a backslash followed by a
// character an escape begins with is that escape; any other is itself.
func unprint(t *testing.T, p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '\\' || i+1 == len(p) {
			b.WriteByte(p[i])
			continue
		}
		width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[p[i+1]]
		if c, ok := map[byte]byte{'\\': '\\', 'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}[p[i+1]]; ok {
			b.WriteByte(c)
			i++
			continue
		}
		if width == 0 {
			b.WriteByte('\\')
			continue
		}
		if i+2+width > len(p) {
			t.Fatalf("%q: escape at %d cut short", p, i)
		}
		v, err := strconv.ParseUint(p[i+2:i+2+width], 16, 32)
		if err != nil {
			t.Fatalf("%q: escape at %d: %v", p, i, err)
		}
		if width == 2 {
			b.WriteByte(byte(v))
		} else {
			b.WriteRune(rune(v))
		}
		i += 1 + width
	}
	return b.String()
}

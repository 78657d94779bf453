package log_test

import (
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestPrintable holds the one cleaner every command prints untrusted text
// through: what would act on a terminal (escape sequences, new lines,
// carriage returns, bidirectional overrides, bytes that are not UTF-8) is
// escaped as strconv would write it, and everything else, other scripts,
// quotes and backslashes included, is left as it is.
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

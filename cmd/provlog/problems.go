package main

// How the checking commands (audit, verify-bundle, verify-evidence,
// verify-proof) say what they found: lines for people by default, one
// JSON object with --json. Both come from the same *log.ProblemsError.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/provlog/provlog/log"
)

// reportProblems is how verify-bundle and verify-evidence tell people
// what is wrong: one "FAILED part: why" line per problem of a
// *log.ProblemsError on stderr, and an error naming dir. Other errors
// pass through.
func reportProblems(stderr io.Writer, dir string, err error) error {
	var pe *log.ProblemsError
	if !errors.As(err, &pe) {
		return err
	}
	printProblems(stderr, "FAILED ", pe)
	return fmt.Errorf("FAILED: %s does not verify (%d problems)", dir, pe.Count())
}

// printProblems writes a line, after prefix, for each of pe's first
// log.MaxProblems problems and then one saying how many more there were.
func printProblems(w io.Writer, prefix string, pe *log.ProblemsError) {
	shown := shownProblems(pe)
	for _, p := range shown {
		// p's String escapes what the checked thing wrote (a file name,
		// an actor), so that it cannot act on the terminal.
		fmt.Fprintf(w, "%s%s\n", prefix, p)
	}
	if n := pe.Count() - len(shown); n > 0 {
		fmt.Fprintf(w, "%s… and %d more problems\n", prefix, n)
	}
}

// shownProblems is the first log.MaxProblems of pe's problems, the ones a
// checking command prints: a forged file can hold a problem a line.
func shownProblems(pe *log.ProblemsError) []log.Problem {
	return pe.Problems[:min(len(pe.Problems), log.MaxProblems)]
}

// failed is a check's error worded for people that still carries the
// problems it found, for --json.
func failed(pe *log.ProblemsError, format string, args ...any) error {
	return &failedError{msg: fmt.Sprintf(format, args...), pe: pe}
}

type failedError struct {
	msg string
	pe  *log.ProblemsError
}

func (e *failedError) Error() string { return e.msg }
func (e *failedError) Unwrap() error { return e.pe }

// A checkVerdict is what a checking command prints with --json: one object on
// stdout whether the check passed or not. OK is true only when it passed;
// Problems are what it found wrong (What names the thing): the first
// log.MaxProblems of the Count found; Error, when set, says why the check
// stopped before it could finish (an unreadable file, a log it could not
// reach): that is not a pass either. Report is the command's own account
// of what it checked.
type checkVerdict struct {
	OK       bool          `json:"ok"`
	What     string        `json:"what,omitempty"`
	Problems []log.Problem `json:"problems"`
	Count    int           `json:"count,omitempty"`
	Error    string        `json:"error,omitempty"`
	Report   any           `json:"report,omitempty"`
}

// checkOutput is where a checking command writes. Its lines for people go
// to stdout, or with --json to stderr, so that stdout holds the verdict
// alone.
type checkOutput struct {
	json           bool
	stdout, stderr io.Writer
}

// text is the writer of the lines for people.
func (o checkOutput) text() io.Writer {
	if o.json {
		return o.stderr
	}
	return o.stdout
}

// done ends a check: with --json it prints the verdict of err (nil: it
// passed) and report. The error returned, for the exit code and stderr,
// is human(err), or err when human is nil.
func (o checkOutput) done(report any, err error, human func(error) error) error {
	if o.json {
		v := checkVerdict{OK: err == nil, Problems: []log.Problem{}, Report: report}
		var pe *log.ProblemsError
		switch {
		case err == nil:
		case errors.As(err, &pe):
			v.What, v.Problems, v.Count = pe.What, shownProblems(pe), pe.Count()
		default:
			v.Error = err.Error()
		}
		b, jerr := json.MarshalIndent(v, "", "  ")
		if jerr != nil {
			return jerr
		}
		if _, werr := fmt.Fprintf(o.stdout, "%s\n", b); werr != nil {
			return werr
		}
	}
	if err != nil && human != nil {
		return human(err)
	}
	return err
}

package log

import (
	"fmt"
	"strings"
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

func (p Problem) String() string { return p.Part + ": " + p.Msg }

// A ProblemsError is the error of a check that found problems: every one
// of them, in the order found. What names the thing checked ("bundle",
// "evidence", "log", "anchor record"). A check that could not read what it
// checks returns another error: it found nothing wrong, it could not look.
type ProblemsError struct {
	What     string    `json:"what"`
	Problems []Problem `json:"problems"`
}

func (e *ProblemsError) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	n := "problems"
	if len(e.Problems) == 1 {
		n = "problem"
	}
	return fmt.Sprintf("%s does not verify (%d %s): %s", e.What, len(e.Problems), n, strings.Join(s, "; "))
}

package log

import (
	"fmt"
	"strings"
)

// A Problem is one part of what a check read that is wrong, and why: a
// file of a bundle or an evidence directory, an entry, a checkpoint. Its
// String form, "part: why", is what people read; its JSON form is what
// --json prints.
type Problem struct {
	Part string `json:"part"`
	Msg  string `json:"problem"`
}

func (p Problem) String() string { return p.Part + ": " + p.Msg }

// A ProblemsError is the error of a check that found problems: every one
// of them, in the order found. What names the thing checked ("bundle",
// "evidence").
type ProblemsError struct {
	What     string    `json:"what"`
	Problems []Problem `json:"problems"`
}

func (e *ProblemsError) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return fmt.Sprintf("%s does not verify (%d problems): %s", e.What, len(e.Problems), strings.Join(s, "; "))
}

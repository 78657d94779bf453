package main

import (
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
	for _, p := range pe.Problems {
		fmt.Fprintf(stderr, "FAILED %s\n", p)
	}
	return fmt.Errorf("FAILED: %s does not verify (%d problems)", dir, len(pe.Problems))
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayPrintsWholeResultPath: a changed result whose difference is
// the whole document (RFC 6901's empty pointer: a result that is no
// longer an object, or a scalar that changed) is printed as such, not as
// an empty list of paths.
func TestReplayPrintsWholeResultPath(t *testing.T) {
	rep := &replay.Report{Outcomes: []replay.Outcome{
		{Index: 7, Server: "s", Tool: "t", Class: replay.Changed, Paths: []string{""}},
		{Index: 8, Server: "s", Tool: "t", Class: replay.Changed, Paths: []string{"/content/0/text", ""}},
	}}
	var b bytes.Buffer
	printReplay(&b, replayOutput{Report: rep})
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 {
		t.Fatalf("output:\n%s", b.String())
	}
	if !strings.Contains(lines[1], "paths (the whole result)") {
		t.Errorf("whole-document difference printed as %q, want it named", lines[1])
	}
	if !strings.Contains(lines[2], "paths /content/0/text (the whole result)") {
		t.Errorf("paths printed as %q", lines[2])
	}
}

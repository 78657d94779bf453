package authn

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// confusablesJSPath is the auditor's page's copy of the look-alike
// letters it marks (log/server/ui/static/confusables.js).
var confusablesJSPath = filepath.Join("..", "..", "log", "server", "ui", "static", "confusables.js")

// confusablesJS is the page's table, made from [confusables]: each
// character other than ASCII that reads as one ASCII letter, with that
// letter. The Go table is the one source; the page's is what this makes
// of it, so the page marks what the sidecar refuses in actor ids.
func confusablesJS() []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated from proxy/authn's confusables table (Unicode's confusables.txt " + confusablesVersion + ") by\n")
	b.WriteString("// TestConfusablesJS (PROVLOG_WRITE_CONFUSABLES_JS=1 go test ./proxy/authn -run TestConfusablesJS); DO NOT EDIT.\n\n")
	b.WriteString("// lookalikeLetters maps each character other than ASCII that Unicode's\n")
	b.WriteString("// confusables data takes for one ASCII letter to that letter, lower case.\n")
	b.WriteString("export const lookalikeLetters = new Map([\n")
	n := 0
	for _, c := range confusables {
		if c.from < 0x80 || len(c.to) != 1 || c.to[0] < 'a' || c.to[0] > 'z' {
			continue
		}
		if n%6 == 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, " [0x%04X, %q],", c.from, c.to)
		if n++; n%6 == 0 {
			b.WriteString("\n")
		}
	}
	if n%6 != 0 {
		b.WriteString("\n")
	}
	b.WriteString("]);\n")
	return b.Bytes()
}

// TestConfusablesJS holds the page's look-alike table to the Go one:
// a change to confusables_table.go (go generate) must be made to the
// page too, by running this test with PROVLOG_WRITE_CONFUSABLES_JS=1.
func TestConfusablesJS(t *testing.T) {
	want := confusablesJS()
	if os.Getenv("PROVLOG_WRITE_CONFUSABLES_JS") == "1" {
		if err := os.WriteFile(confusablesJSPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(confusablesJSPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not made from confusables_table.go: run PROVLOG_WRITE_CONFUSABLES_JS=1 go test ./proxy/authn -run TestConfusablesJS", confusablesJSPath)
	}
}

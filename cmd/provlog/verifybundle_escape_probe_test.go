package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyBundleNameEscapesProbe: `provlog verify-bundle` prints each
// problem raw (problems.go reportProblems: "FAILED %s\n"), and a
// problem's part is a name the bundle's author chose: checkListing
// (log/bundle/verify.go) reports a file not in the manifest by its name
// as found on disk. A hostile bundle holding a file whose name carries
// terminal escapes and a newline has them run on the auditor's terminal:
// observed, stderr holds ESC ] 0 ; … BEL (window title), ESC [ 1 A
// ESC [ 2 K (erase the line above) and a line of its own reading
// "OK: 4 entries [0, 4) are in provlog.test∕export …", which no check
// wrote. Fix: print a problem's part and message through one cleaner
// (control and format characters escaped, as opp's clean does), here
// and wherever problems reach a terminal (audit, verify-evidence).
func TestVerifyBundleNameEscapesProbe(t *testing.T) {
	data := makeDataDir(t, 3)
	out := filepath.Join(t.TempDir(), "bundle")
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if err := runExport(ctx, []string{"--data", data, "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr.String())
	}
	name := "notes\x1b]0;bundle verified\x07\x1b[1A\x1b[2K\nOK: 4 entries [0, 4) are in provlog.test\u2215export at size 4\n.txt" // U+2215: a name holds no "/"
	if err := os.WriteFile(filepath.Join(out, name), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code := run(ctx, []string{"verify-bundle", out}, &stdout, &stderr)
	all := stdout.String() + stderr.String()
	if code == 0 || !strings.Contains(all, "is not listed in") {
		t.Fatalf("verify-bundle of a bundle with an unlisted file: exit %d: %s", code, all)
	}
	if i := strings.IndexByte(all, 0x1b); i >= 0 {
		t.Errorf("verify-bundle prints a terminal escape from a bundle's file name raw: %q", all)
	}
	for _, l := range strings.Split(all, "\n") {
		if strings.HasPrefix(l, "OK:") {
			t.Errorf("verify-bundle of a failing bundle prints a line the bundle wrote: %q", l)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyBundleNameEscapes: `provlog verify-bundle` prints each
// problem it finds, and a problem's part can be a name the bundle's
// author chose (checkListing reports a file not in the manifest by its
// name on disk). A name holding terminal escapes and a new line followed
// by a fake "OK: …" must reach the auditor escaped, on the problem's one
// line: reportProblems prints log.Problem's String, which escapes them
// with log.Printable.
func TestVerifyBundleNameEscapes(t *testing.T) {
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

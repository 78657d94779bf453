package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
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

// TestVerifyBundlePurgeActorEscapes: verify-bundle says who purged each
// payload the bundle's entries name ("purged: … by ACTOR"), and the actor
// is whatever the purge entry in the bundle's log holds. A forger's log
// whose purge entry names an actor holding terminal escapes and a new
// line followed by a fake "OK: …" must reach the auditor escaped, on the
// purged line.
func TestVerifyBundlePurgeActorEscapes(t *testing.T) {
	p := makePayloadLog(t)
	k, err := loadKeys(p.data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(p.data, false)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(context.Background(), store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	const hostile = "mallory\x1b]0;bundle verified\x07\x1b[1A\x1b[2K\nOK: 9 entries are in provlog.test\u2215export"
	b, err := (&blobs.PurgeEntry{Time: time.Now(), Actor: "forged", Reason: "erasure", Blobs: []string{p.aliceArgs}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Append(context.Background(), withActor(t, b, hostile)); err != nil {
		t.Fatal(err)
	}
	seq.Close()
	store.Close()
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", p.data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"verify-bundle", out}, &stdout, &stderr)
	all := stdout.String() + stderr.String()
	if code != 0 || !strings.Contains(all, "purged by purge entry") || !strings.Contains(all, "mallory") {
		t.Fatalf("verify-bundle of a bundle with a purge entry: exit %d: %s", code, all)
	}
	if strings.IndexByte(all, 0x1b) >= 0 {
		t.Errorf("verify-bundle prints a terminal escape from a purge entry's actor raw: %q", all)
	}
	if n := strings.Count(all, "\nOK:") + strings.Count(all[:min(len(all), 3)], "OK:"); n != 1 {
		t.Errorf("verify-bundle prints %d lines starting OK:, want its own one: %q", n, all)
	}
}

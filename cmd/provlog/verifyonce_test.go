package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyBundleReadsEntriesOnce swaps provenance.jsonl once the bundle
// is verified, by a rename and by a write in place: what verify-bundle
// then says of the tasks and payloads must come from the bytes it
// verified, or it must fail; never from the forged ones.
func TestVerifyBundleReadsEntriesOnce(t *testing.T) {
	data := makeDataDir(t, 20)
	out := filepath.Join(t.TempDir(), "bundle")
	var stdout, stderr bytes.Buffer
	ctx := context.Background()
	if err := runExport(ctx, []string{"--data", data, "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr.String())
	}
	stdout.Reset()
	if err := runVerifyBundle(ctx, []string{out}, &stdout, &stderr); err != nil {
		t.Fatalf("verify-bundle: %v\n%s", err, stderr.String())
	}
	want := stdout.String()
	p := filepath.Join(out, "provenance.jsonl")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The forgery: each call's result said to be kept, so that the
	// entries name a payload, which the verified ones do not.
	forged := bytes.ReplaceAll(orig, []byte(`"result_sha256":`), []byte(`"result_retained":true,"result_sha256":`))
	if bytes.Equal(forged, orig) {
		t.Fatal("no call entry to forge")
	}
	t.Cleanup(func() { verifiedBundle = func(string) {} })

	// By a rename: the file verified is the one read.
	verifiedBundle = func(dir string) {
		tmp := filepath.Join(t.TempDir(), "forged")
		if err := os.WriteFile(tmp, forged, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "provenance.jsonl")); err != nil {
			t.Fatal(err)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if err := runVerifyBundle(ctx, []string{out}, &stdout, &stderr); err != nil || stdout.String() != want {
		t.Errorf("provenance.jsonl renamed over after the check: err %v, said\n%s\nwant\n%s\nstderr %s", err, stdout.String(), want, stderr.String())
	}

	// In place: what is read now is not what was verified, and it fails.
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	verifiedBundle = func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "provenance.jsonl"), forged, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout.Reset()
	stderr.Reset()
	err = runVerifyBundle(ctx, []string{out}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error()+stderr.String(), "changed after it was verified") {
		t.Errorf("provenance.jsonl written over in place after the check: err %v, said\n%s\nstderr %s", err, stdout.String(), stderr.String())
	}
}

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestUIViewBundleKey: `provlog view` of an export bundle gives the page,
// as /ui/log.json's vkey, the log.vkey that came in the bundle. Anyone
// can make a bundle of any origin with a key of their own (here: a fresh
// log, as a forger would make one), so the page, when the reader gave no
// key, must say the key it checked against came with the bundle and is
// to be compared with the log's from a trusted source, as verify-bundle
// says, never that it is the log's own. The header says so too.
func TestUIViewBundleKey(t *testing.T) {
	data := makeDataDir(t, 3)
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	p, ctx := openPage(t)
	base := serveView(t, context.Background(), out)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#entry=1", base))
	if v != "true" {
		t.Fatalf("entry 1 of the bundle: data-verified=%s: %s", v, txt)
	}
	if !strings.Contains(txt, "bundle") {
		t.Errorf("the verdict on a bundle, checked against the key the bundle brought, does not say the key is the bundle's: %s", txt)
	}
	if strings.Contains(txt, "log's own verifier key") {
		t.Errorf("the verdict on a bundle calls the bundle's key the log's own: %s", txt)
	}
	var head string
	if err := p.Eval(ctx, `document.querySelector("header").innerText`, &head); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(head, "log's own verifier key") || !strings.Contains(head, "came with this bundle") {
		t.Errorf("the header on a bundle calls its key the log's own: %s", head)
	}
}

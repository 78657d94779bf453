package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestUIViewBundleKeyProbe: `provlog view` of an export bundle gives the
// page, as /ui/log.json's vkey, the log.vkey that came in the bundle, and
// the page calls it the log's: the header reads "The log's own verifier
// key: …" and the verdict "✓ Verified … Entry 1 is in the log
// provlog.test/export … Checked against the log's own verifier key, as
// this server gives it". Anyone can make a bundle of any origin with a
// key of their own (here: a fresh log, as a forger would make one), and
// the page then says, in green, that its entries are in that log, never
// that the key is only the bundle's and must be compared with the log's
// from a trusted source. `provlog verify-bundle` says exactly that
// ("signed with the bundle's log.vkey (…: compare it with the log's key
// from a source you trust)"); the page, which README offers for the same
// bundles offline, does not. Fix: when log.json's source is "bundle" or
// "evidence" and the reader gave no key, word the verdict (and header) as
// the bundle's own key, with the advice to compare it or enter the log's.
func TestUIViewBundleKeyProbe(t *testing.T) {
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
}

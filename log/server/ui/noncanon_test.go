package ui

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// runVerifyJS runs script, an ES module, with node beside a copy of
// static/verify.js (as verify.mjs), and returns its output. Node is
// required in CI.
func runVerifyJS(t *testing.T, script string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is required in CI: %v", err)
		}
		t.Skipf("node is not installed: %v", err)
	}
	dir := t.TempDir()
	src, err := static.ReadFile("static/verify.js")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "verify.mjs"), src, 0o600)
	os.WriteFile(filepath.Join(dir, "t.mjs"), []byte(script), 0o600)
	out, err := exec.Command(node, filepath.Join(dir, "t.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return string(out)
}

// TestBrowserRefusesNonCanonicalCosignature: a checkpoint cosigned by a
// witness whose cosignature line is spelled with a base64 spare bit set
// (the same bytes to a lenient decoder). C2SP signed notes use RFC 4648
// base64, whose decoders may refuse pad bits that are not zero (§3.5), and
// every Go verifier of provlog's (log.OpenNote) refuses such a note; the
// auditor's view must too, not show the witness's cosignature as verified.
// On the base the browser's decoder (atob) dropped the spare bits and the
// cosignature verified.
func TestBrowserRefusesNonCanonicalCosignature(t *testing.T) {
	skey, vkey, _ := note.GenerateKey(rand.Reader, "provlog.test/ui")
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	wskey, wvkey, err := log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	if err != nil {
		t.Fatal(err)
	}
	w, err := log.ParseCosignerKey(wskey)
	if err != nil {
		t.Fatal(err)
	}
	text := "provlog.test/ui\n3\n" + strings.Repeat("A", 43) + "=\n"
	signed, err := note.Sign(&note.Note{Text: text}, signer, w)
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	sloppy := []byte(string(signed))
	i := strings.LastIndex(string(sloppy), "==\n") - 1 // the cosignature/v1 line: 76 bytes, 4 spare bits
	sloppy[i] = alphabet[strings.IndexByte(alphabet, sloppy[i])^1]
	if _, err := log.OpenNote(sloppy, note.VerifierList(verifier, w.Verifier())); err == nil {
		t.Fatal("log.OpenNote took the spelling: not the case probed")
	}
	in, _ := json.Marshal(map[string]string{"note": string(sloppy), "vkey": vkey, "wvkey": wvkey})
	out := runVerifyJS(t, `import * as v from "./verify.mjs";
const x = `+string(in)+`;
let verdict;
try {
  const n = v.parseNote(x.note);
  const lines = await v.signatureLines(n, [await v.parseVKey(x.vkey)], [await v.parseVKey(x.wvkey)]);
  verdict = "accepted: " + JSON.stringify(lines.map((l) => ({ name: l.name, ok: l.ok })));
} catch (e) {
  verdict = "refused: " + e.message;
}
console.log(verdict);
`)
	if !strings.HasPrefix(out, "refused: ") || !strings.Contains(out, "canonical") {
		t.Errorf("the browser's verifier on a cosignature spelled with a base64 spare bit set: %s want it refused as not canonical base64, as log.OpenNote refuses it", out)
	}
}

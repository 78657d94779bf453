package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/cmd/internal/browser"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/server/ui"
)

// TestUIVerifyJS runs the page's verify.js in Chromium against proofs and
// signatures made in Go: the RFC 6962 reference tree's inclusion proofs
// for every index of every tree size up to 40 recompute its roots (and a
// proof for another index or cut short does not), and a note signed with
// x/mod's note package and a cosignature/v1 verify (and do not once the
// text changes).
func TestUIVerifyJS(t *testing.T) {
	p, ctx := openBarePage(t)

	tree := testonly.New(rfc6962.DefaultHasher)
	for i := range 40 {
		tree.AppendData([]byte(fmt.Sprintf("entry %d", i)))
	}
	t.Run("inclusion", func(t *testing.T) { checkJSInclusion(t, ctx, p, tree) })
	t.Run("consistency", func(t *testing.T) { checkJSConsistency(t, ctx, p, tree) })
	t.Run("signatures", func(t *testing.T) { checkJSSignatures(t, ctx, p, tree) })
}

// jsResult is what the scripts below return: how many cases they checked
// and which were wrong.
type jsResult struct {
	Checked int
	Bad     []string
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// checkJSInclusion: the reference tree's inclusion proofs for every index
// of every size up to 40 recompute its roots in verify.js, and a proof for
// another index or cut short does not.
func checkJSInclusion(t *testing.T, ctx context.Context, p *browser.Page, tree *testonly.Tree) {
	type proofCase struct {
		I, N  uint64
		Leaf  string
		Proof []string
		Root  string
	}
	var cases []proofCase
	for n := uint64(1); n <= 40; n++ {
		for i := range n {
			pr, err := tree.InclusionProof(i, n)
			if err != nil {
				t.Fatal(err)
			}
			c := proofCase{I: i, N: n, Leaf: b64(tree.LeafHash(i)), Root: b64(tree.HashAt(n)), Proof: []string{}}
			for _, h := range pr {
				c.Proof = append(c.Proof, b64(h))
			}
			cases = append(cases, c)
		}
	}
	cj, _ := json.Marshal(cases)
	var out jsResult
	script := `(async () => {
		const m = await import("/ui/verify.js");
		const out = {Checked: 0, Bad: []};
		for (const c of ` + string(cj) + `) {
			const leaf = m.decodeBase64(c.Leaf), proof = c.Proof.map(m.decodeBase64);
			const root = m.encodeBase64(await m.rootFromInclusion(BigInt(c.I), BigInt(c.N), leaf, proof));
			if (root !== c.Root) out.Bad.push("good proof " + c.I + "/" + c.N);
			out.Checked++;
			if (c.I + 1 < c.N) {
				const other = await m.rootFromInclusion(BigInt(c.I + 1), BigInt(c.N), leaf, proof).then(m.encodeBase64, () => "threw");
				if (other === c.Root) out.Bad.push("proof for another index " + c.I + "/" + c.N);
			}
			if (proof.length > 0) {
				const cut = await m.rootFromInclusion(BigInt(c.I), BigInt(c.N), leaf, proof.slice(1)).then(m.encodeBase64, () => "threw");
				if (cut !== "threw") out.Bad.push("short proof did not throw " + c.I + "/" + c.N);
			}
		}
		return out;
	})()`
	if err := p.Eval(ctx, script, &out); err != nil {
		t.Fatal(err)
	}
	if out.Checked != len(cases) || len(out.Bad) > 0 {
		t.Errorf("verify.js checked %d of %d proofs; wrong: %q", out.Checked, len(cases), out.Bad)
	}

}

// checkJSConsistency: consistency proofs between every pair of sizes up
// to 40 verify in verify.js, and not against a wrong old root or cut short.
func checkJSConsistency(t *testing.T, ctx context.Context, p *browser.Page, tree *testonly.Tree) {
	// Consistency proofs between every pair of sizes up to 40, and the
	// same proofs against a wrong old root.
	type consCase struct {
		M, N          uint64
		Old, New, Bad string
		Proof         []string
	}
	var cons []consCase
	for n := uint64(1); n <= 40; n++ {
		for m := uint64(1); m <= n; m++ {
			pr, err := tree.ConsistencyProof(m, n)
			if err != nil {
				t.Fatal(err)
			}
			c := consCase{M: m, N: n, Old: b64(tree.HashAt(m)), New: b64(tree.HashAt(n)), Bad: b64(tree.HashAt(max(1, m-1))), Proof: []string{}}
			if m == 1 {
				c.Bad = b64(tree.LeafHash(1 % n))
			}
			for _, h := range pr {
				c.Proof = append(c.Proof, b64(h))
			}
			cons = append(cons, c)
		}
	}
	cj, _ := json.Marshal(cons)
	var out jsResult
	script := `(async () => {
		const m = await import("/ui/verify.js");
		const out = {Checked: 0, Bad: []};
		for (const c of ` + string(cj) + `) {
			const d = m.decodeBase64, proof = c.Proof.map(d);
			if (!(await m.verifyConsistency(BigInt(c.M), BigInt(c.N), d(c.Old), d(c.New), proof))) out.Bad.push("good " + c.M + "->" + c.N);
			if (c.Bad !== c.Old && (await m.verifyConsistency(BigInt(c.M), BigInt(c.N), d(c.Bad), d(c.New), proof))) out.Bad.push("wrong old root " + c.M + "->" + c.N);
			if (proof.length > 0 && (await m.verifyConsistency(BigInt(c.M), BigInt(c.N), d(c.Old), d(c.New), proof.slice(0, -1)))) out.Bad.push("short " + c.M + "->" + c.N);
			out.Checked++;
		}
		return out;
	})()`
	if err := p.Eval(ctx, script, &out); err != nil {
		t.Fatal(err)
	}
	if out.Checked != len(cons) || len(out.Bad) > 0 {
		t.Errorf("verify.js checked %d of %d consistency proofs; wrong: %q", out.Checked, len(cons), out.Bad)
	}

}

// checkJSSignatures: a note signed with x/mod's note package and a
// cosignature/v1 verify in verify.js, and do not once the text changes or
// with another key.
func checkJSSignatures(t *testing.T, ctx context.Context, p *browser.Page, tree *testonly.Tree) {
	// Signatures: a log key from x/mod's note package, a witness key from
	// package log.
	skey, vkey, err := note.GenerateKey(rand.Reader, "example.org/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cos := newCosigner(t, "witness.example/w")
	body := "example.org/log\n7\n" + b64(tree.HashAt(7)) + "\n"
	signed, err := note.Sign(&note.Note{Text: body}, signer, cos)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(signed), "\n7\n", "\n8\n", 1)
	var sig map[string]bool
	script := fmt.Sprintf(`(async () => {
		const m = await import("/ui/verify.js");
		const k = await m.parseVKey(%q), w = await m.parseVKey(%q), other = await m.parseVKey(%q);
		const good = m.parseNote(%q), bad = m.parseNote(%q);
		return {
			logGood: (await m.verifyNoteSignature(good, k)).ok,
			logChanged: (await m.verifyNoteSignature(bad, k)).ok,
			otherKey: (await m.verifyNoteSignature(good, other)).ok,
			cosGood: (await m.verifyCosignature(good, w)).ok === true,
			cosChanged: (await m.verifyCosignature(bad, w)).ok === true,
		};
	})()`, vkey, cos.Verifier().String(), otherVKey(t, "example.org/log"), signed, changed)
	if err := p.Eval(ctx, script, &sig); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"logGood": true, "logChanged": false, "otherKey": false, "cosGood": true, "cosChanged": false}
	for k, w := range want {
		if sig[k] != w {
			t.Errorf("verify.js %s = %v, want %v", k, sig[k], w)
		}
	}
}

func newCosigner(t *testing.T, name string) *log.CosignatureSigner {
	t.Helper()
	skey, _, err := log.GenerateCosignerKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := log.ParseCosignerKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func otherVKey(t *testing.T, name string) string {
	t.Helper()
	_, v, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// openBarePage opens the page served with no log behind it, for tests
// that run its scripts' functions.
func openBarePage(t *testing.T) (*browser.Page, context.Context) {
	t.Helper()
	p, ctx := openPage(t)
	hs := httptest.NewServer(ui.Handler(ui.Info{VKey: "x+00000000+AQ=="}))
	t.Cleanup(hs.Close)
	if err := p.Navigate(ctx, hs.URL+"/ui/"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitString(ctx, `document.body?.dataset.done`); err != nil {
		t.Fatal(err)
	}
	return p, ctx
}

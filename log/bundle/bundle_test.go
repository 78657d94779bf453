package bundle_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/witness/witnesstest"
)

// fixture is a log with calls, task entries and an anchor, ready to export.
type fixture struct {
	store     *logtest.Memory
	seq       *server.Sequencer
	signer    note.Signer
	vkey      string
	anchorPEM []byte
	anchors   string
	tsaRoots  []byte
	rekorKeys []byte
	// witnessThreshold is the witness policy's threshold exports use (0:
	// all the witnesses).
	witnessThreshold int
	// With an anchor: the anchoring key and the runner that anchors the
	// log's newest checkpoint (AnchorNow), with its authorities.
	anchorKey *ecdsa.PrivateKey
	anchorCfg *online.Resolved
	runner    *online.Runner
	rekor     *fakerekor.Rekor
}

// fixtureAuth is the auth member of the fixture's OAuth call: a
// reviewer agent acting for alice through an orchestrator.
var fixtureAuth = &log.Auth{
	Issuer: "https://idp.example/", Subject: "alice", ClientID: "review-agent", JTI: "jti-1", Scope: "provlog.tools",
	TokenSHA256: strings.Repeat("ab", 32), Via: log.AuthViaJWT,
	Act: &log.Act{Subject: "review-agent", Act: &log.Act{Subject: "orchestrator", ClientID: "orch"}},
}

func newFixture(t testing.TB, calls int, withAnchor bool) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{store: logtest.NewMemory()}
	skey, vkey, _ := note.GenerateKey(rand.Reader, "provlog.test/bundle")
	f.signer, _ = note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	f.vkey = vkey
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	f.anchorPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	var err error
	f.seq, err = server.OpenSequencer(ctx, f.store, f.signer, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), f.signer.Name(), vkey, pub, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.seq.Close() })
	f.anchorKey = key
	app := func(kind, actor string, fields map[string]any) { f.app(t, kind, actor, fields) }
	app("task.create", "alice", map[string]any{"task_id": "t_1", "title": "find gene"})
	app("task.accept", "bob", map[string]any{"task_id": "t_1"})
	for i := range calls {
		fields := map[string]any{
			"server": "uniprot", "tool": "get_entry", "args": map[string]any{"id": "P04637", "n": i, "api_key": "[redacted]"},
			"is_error": false, "started": time.Now().UTC().Format(log.TimeFormat), "duration_ns": 1250000,
			"result_sha256": hex.EncodeToString(make([]byte, 32)), "result_bytes": 12,
			"client": map[string]any{"name": "claude desktop", "version": "1.2.3"}, "protocol_version": "2025-06-18",
		}
		if i%2 == 0 {
			fields["release"] = "2025_01"
		}
		app("call", "bob", fields)
	}
	// A call made with an OAuth token: an agent acting for alice.
	b, err := (&log.Entry{Kind: "call", Time: time.Now(), Actor: "idp:alice", Auth: fixtureAuth, Fields: map[string]any{
		"server": "uniprot", "tool": "get_entry", "args": map[string]any{"id": "P38398"},
		"started": time.Now().UTC().Format(log.TimeFormat), "protocol_version": "2025-06-18",
	}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.seq.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	app("task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "observed", "summary": "TP53 is P04637", "evidence": []uint64{3}})
	app("task.handoff", "bob", map[string]any{"task_id": "t_1", "to": "carol", "snapshot": map[string]any{"state": "accepted", "owner": "bob"}})
	if withAnchor {
		tsa := testtsa.New(t, "TSA")
		rk := fakerekor.New(t)
		f.rekor = rk
		cfg := &online.Config{Interval: time.Minute, Timeout: 5 * time.Second,
			TSA:   []online.TSAConfig{{URL: tsa.URL, Roots: []string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}))}}},
			Rekor: &online.RekorConfig{URL: rk.URL, PublicKey: string(rk.PublicKeyPEM())}}
		res, err := cfg.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		f.anchors = filepath.Join(t.TempDir(), "anchors")
		recs, err := anchor.OpenStore(f.anchors)
		if err != nil {
			t.Fatal(err)
		}
		f.anchorCfg = res
		f.runner, err = online.NewRunner(ctx, online.Options{Config: res, Log: f.seq, Tree: f.store, Records: recs, Signer: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.runner.AnchorNow(ctx); err != nil {
			t.Fatal(err)
		}
		f.tsaRoots = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw})
		f.rekorKeys = rk.PublicKeyPEM()
		app("task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "reported", "summary": "after anchoring", "source": "a paper"})
	}
	return f
}

// app appends an entry to the fixture's log.
func (f *fixture) app(t testing.TB, kind, actor string, fields map[string]any) {
	t.Helper()
	b, err := (&log.Entry{Kind: kind, Time: time.Now(), Actor: actor, Fields: fields}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.seq.Append(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// checkpoint returns the latest checkpoint, cosigned by a test witness.
func (f *fixture) checkpoint(t testing.TB) ([]byte, []string) {
	ws := newWitnesses(t, "witness.test/w1")
	return f.cosignedBy(t, ws[0]), []string{ws[0].Verifier().String()}
}

// newWitnesses makes a witness cosigning key for each name.
func newWitnesses(t testing.TB, names ...string) []*log.CosignatureSigner {
	var out []*log.CosignatureSigner
	for _, name := range names {
		out = append(out, witnesstest.NewCosigner(t, name))
	}
	return out
}

// cosignedBy returns the latest checkpoint, cosigned by ws.
func (f *fixture) cosignedBy(t testing.TB, ws ...*log.CosignatureSigner) []byte {
	_, cp := f.seq.Checkpoint()
	n, err := note.Open(cp, note.VerifierList(mustVerifier(t, f.vkey)))
	if err != nil {
		t.Fatal(err)
	}
	signers := []note.Signer{f.signer}
	for _, w := range ws {
		signers = append(signers, w)
	}
	out, err := note.Sign(&note.Note{Text: n.Text}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustVerifier(t testing.TB, vkey string) note.Verifier {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) export(t testing.TB, from, to uint64) string {
	t.Helper()
	cp, ws := f.checkpoint(t)
	dir, err := f.exportCheckpoint(t, cp, ws, f.anchors, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// exportCheckpoint exports [from, to) of the fixture's log under the
// checkpoint cp, cosigned by ws, with the anchor records in anchors.
func (f *fixture) exportCheckpoint(t testing.TB, cp []byte, ws []string, anchors string, from, to uint64) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	// The sidecar whose records these are, as provlog export names it.
	sidecar, err := anchor.ReadSidecar(anchors)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bundle.Export(context.Background(), f.store, bundle.ExportOptions{
		Dir: dir, From: from, To: to, Checkpoint: cp, VKey: f.vkey, AnchorPub: f.anchorPEM,
		AnchorsDir: anchors, AnchorSidecar: sidecar, ReadAnchor: anchor.ReadBundled, TSARoots: f.tsaRoots, RekorKeys: f.rekorKeys, Witnesses: ws, WitnessThreshold: f.witnessThreshold, Generator: "provlog test",
	})
	return dir, err
}

func TestExportVerify(t *testing.T) {
	f := newFixture(t, 20, true)
	for _, r := range []struct{ from, to uint64 }{{0, 0}, {3, 10}, {5, 0}} {
		dir := f.export(t, r.from, r.to)
		rep, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
		if err != nil {
			t.Fatalf("[%d,%d): %v", r.from, r.to, err)
		}
		if rep.Anchors != 1 || rep.Witnesses != 1 || rep.SelfTrusted {
			t.Errorf("[%d,%d): report %+v", r.from, r.to, rep)
		}
	}
}

// TestTamper flips one byte in every file of a bundle: once leaving the
// manifest as it is, once fixing the manifest's hash too (so only the
// content checks can catch it). Each must fail and name the file.
func TestTamper(t *testing.T) {
	f := newFixture(t, 5, true)
	dir := f.export(t, 0, 0)
	var m bundle.Manifest
	mb, _ := os.ReadFile(filepath.Join(dir, bundle.ManifestFile))
	json.Unmarshal(mb, &m)
	names := append([]string{bundle.ManifestFile}, keys(m.Files)...)
	for _, name := range names {
		for _, fix := range []bool{false, true} {
			if fix && name == bundle.ManifestFile {
				continue
			}
			t.Run(name+map[bool]string{false: "", true: "+manifest"}[fix], func(t *testing.T) {
				d := copyDir(t, dir)
				p := filepath.Join(d, filepath.FromSlash(name))
				b, _ := os.ReadFile(p)
				// A byte in the middle, inside the content that matters.
				at := len(b) / 2
				if name == bundle.ManifestFile {
					at = bytes.Index(b, []byte(`"size"`)) + 9
				}
				b[at] ^= 0x04
				os.WriteFile(p, b, 0o644)
				if fix {
					fixManifest(t, d, name, b)
				}
				_, err := bundle.Verify(context.Background(), d, anchor.VerifyBundled)
				if err == nil {
					t.Fatalf("flipping byte %d of %s went unnoticed", at, name)
				}
				var ve *bundle.VerifyError
				if !errors.As(err, &ve) {
					t.Fatalf("error is %T: %v", err, err)
				}
				found := false
				for _, p := range ve.Problems {
					if p.Part == name {
						found = true
					}
				}
				if !found {
					t.Errorf("problems do not name %s: %v", name, err)
				}
			})
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func fixManifest(t *testing.T, dir, name string, b []byte) {
	p := filepath.Join(dir, bundle.ManifestFile)
	var m bundle.Manifest
	mb, _ := os.ReadFile(p)
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	h := sha256hex(b)
	m.Files[name] = h
	out, _ := json.MarshalIndent(m, "", "  ")
	os.WriteFile(p, out, 0o644)
}

func copyDir(t *testing.T, src string) string {
	dst := filepath.Join(t.TempDir(), "b")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestPythonProv loads provenance.json with Debian's python3-prov and
// round-trips it through prov-convert.
func TestPythonProv(t *testing.T) {
	conv := needPythonProv(t)
	f := newFixture(t, 4, true)
	dir := f.export(t, 0, 0)
	doc := filepath.Join(dir, bundle.ProvFile)
	out := pythonProv(t, `
recs = d.get_records()
kinds = {}
for r in recs:
    kinds[r.get_type().localpart] = kinds.get(r.get_type().localpart, 0) + 1
print(" ".join("%s=%d" % (k, kinds[k]) for k in sorted(kinds)))
`, doc)
	t.Logf("python3-prov read: %s", out)
	for _, want := range []string{"Activity=", "Entity=", "Agent=", "Usage=", "Generation=", "Association=", "Communication=", "Attribution=", "Derivation=", "Influence=", "Delegation="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("python3-prov found no %s records: %s", want, out)
		}
	}
	pn := provRoundTrip(t, conv, doc)
	for _, want := range []string{"wasInformedBy(", "wasAssociatedWith(", "wasAttributedTo(", "actedOnBehalfOf(", "ni:///sha-256;"} {
		if !bytes.Contains(pn, []byte(want)) {
			t.Errorf("PROV-N has no %s", want)
		}
	}
}

// provRoundTrip converts the PROV-JSON document doc with prov-convert to
// PROV-N, which it returns, and back to JSON, which prov-compare must
// find the same document.
func provRoundTrip(t *testing.T, conv, doc string) []byte {
	t.Helper()
	provn := filepath.Join(t.TempDir(), "doc.provn")
	if out, err := exec.Command(conv, "-f", "provn", doc, provn).CombinedOutput(); err != nil {
		t.Fatalf("prov-convert: %v\n%s", err, out)
	}
	back := filepath.Join(t.TempDir(), "back.json")
	if out, err := exec.Command(conv, "-f", "json", doc, back).CombinedOutput(); err != nil {
		t.Fatalf("prov-convert to json: %v\n%s", err, out)
	}
	if cmp, err := exec.LookPath("prov-compare"); err == nil {
		if out, err := exec.Command(cmp, "-f", "json", "-F", "json", doc, back).CombinedOutput(); err != nil {
			t.Errorf("prov-compare: the round trip changed the document: %v\n%s", err, out)
		}
	}
	pn, err := os.ReadFile(provn)
	if err != nil {
		t.Fatal(err)
	}
	return pn
}

// needPythonProv skips the test when Debian's python3-prov or prov-tools
// is missing, except in CI, and returns prov-convert's path.
func needPythonProv(t *testing.T) string {
	t.Helper()
	conv, err := exec.LookPath("prov-convert")
	if err == nil {
		err = exec.Command(pythonPath, "-c", "import prov.model").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-prov and prov-tools are required in CI (apt-get install -y python3-prov prov-tools): %v", err)
		}
		t.Skipf("python3-prov or prov-tools missing: %v", err)
	}
	return conv
}

// pythonPath is Debian's python, which python3-prov is installed for.
const pythonPath = "/usr/bin/python3"

// pythonProv reads the PROV-JSON document doc with python3-prov, as d,
// runs script on it and returns what it prints.
func pythonProv(t *testing.T, script, doc string) []byte {
	t.Helper()
	script = "import sys, prov.model\nd = prov.model.ProvDocument.deserialize(sys.argv[1], format='json')\n" + script
	out, err := exec.Command(pythonPath, "-c", script, doc).CombinedOutput()
	if err != nil {
		t.Fatalf("python3-prov: %v\n%s", err, out)
	}
	return out
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestProvAuth: an OAuth entry's auth member is in the PROV document: the
// token's claims on the activity, the OAuth client as a software agent,
// and the act chain as delegations down to the entry's actor.
func TestProvAuth(t *testing.T) {
	f := newFixture(t, 1, false)
	doc := readProv(t, f.export(t, 0, 0))
	var act string
	for id, a := range doc["activity"] {
		if a["provlog:authSubject"] == "alice" {
			act = id
			for k, want := range map[string]string{"provlog:authIssuer": "https://idp.example/", "provlog:authClientId": "review-agent",
				"provlog:authJti": "jti-1", "provlog:authScope": "provlog.tools", "provlog:authVia": "jwt", "provlog:tokenSha256": fixtureAuth.TokenSHA256} {
				if a[k] != want {
					t.Errorf("%s = %v, want %q", k, a[k], want)
				}
			}
		}
	}
	if act == "" {
		t.Fatalf("no activity carries the auth member: %v", doc["activity"])
	}
	const idp = "https%3A%2F%2Fidp.example%2F"
	client, reviewer, orch := "log:oauth-client/"+idp+"/review-agent", "log:act/"+idp+"/review-agent", "log:act/"+idp+"/orchestrator"
	for _, id := range []string{client, reviewer, orch} {
		if doc["agent"][id] == nil {
			t.Errorf("no agent %s", id)
		}
	}
	type pair struct{ delegate, responsible string }
	delegations := map[pair]map[string]any{}
	for _, d := range doc["actedOnBehalfOf"] {
		if d["prov:activity"] == act {
			delegations[pair{d["prov:delegate"].(string), d["prov:responsible"].(string)}] = d
		}
	}
	if len(delegations) != 2 || delegations[pair{reviewer, orch}] == nil || delegations[pair{orch, "log:actor/idp%3Aalice"}] == nil {
		t.Errorf("delegations %v, want the reviewer for the orchestrator for alice", delegations)
	} else if delegations[pair{orch, "log:actor/idp%3Aalice"}]["provlog:clientId"] != "orch" {
		t.Errorf("the orchestrator's delegation lacks its client_id: %v", delegations)
	}
	roles := map[string]string{}
	for _, a := range doc["wasAssociatedWith"] {
		if a["prov:activity"] == act {
			role, _ := a["prov:role"].(map[string]any)
			roles[a["prov:agent"].(string)], _ = role["$"].(string)
		}
	}
	if roles[client] != "provlog:oauthClient" || roles[reviewer] != "provlog:actingParty" || roles["log:actor/idp%3Aalice"] != "provlog:actor" {
		t.Errorf("associations %v", roles)
	}
}

// readProv reads the PROV document of the bundle in dir as its record
// groups, each a map from a record's id to its attributes.
func readProv(t *testing.T, dir string) map[string]map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, bundle.ProvFile))
	if err != nil {
		t.Fatal(err)
	}
	var groups map[string]json.RawMessage
	if err := json.Unmarshal(b, &groups); err != nil {
		t.Fatal(err)
	}
	doc := map[string]map[string]map[string]any{}
	for g, raw := range groups {
		if g == "prefix" {
			continue
		}
		var m map[string]map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		doc[g] = m
	}
	return doc
}

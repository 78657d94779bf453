package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	gocose "github.com/veraison/go-cose"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/provlog/provlog/anchor/anchortest/realsvc"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestEvidenceEndToEnd records a call and an observed claim citing it
// through a sidecar anchored by real authorities (OpenSSL's TSA,
// sigstore's timestamp-server, rekor-server on Trillian) and cosigned by
// two witnesses; writes evidence for both entries with provlog evidence;
// verifies it with verify-evidence, its tokens with `openssl ts -verify`,
// its tlog-proof receipt with a verifier written here from the C2SP specs
// on x/mod's tlog and note, and its COSE receipt with go-cose; and
// changes one byte in every file, which verify-evidence names.
func TestEvidenceEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		testtsa.Missing(t, "openssl is not installed")
	}
	ossl := testtsa.NewOpenSSL(t)
	tsURL, tsRoot, tsInter := realsvc.TimestampServer(t)
	rekorURL, rekorKey := realsvc.Rekor(t)

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	k := mustKeygen(t, data, "provlog.example/evidence")
	var wcfg strings.Builder
	var witnessKeys []string
	for _, name := range []string{"witness.example/w1", "witness.example/w2"} {
		cos := witnesstest.NewCosigner(t, name)
		w := logWitness(t, cos, k.verifier)
		ws := httptest.NewServer(w)
		t.Cleanup(ws.Close)
		fmt.Fprintf(&wcfg, "  - {url: %s, vkey: %q}\n", ws.URL, cos.Verifier().String())
		witnessKeys = append(witnessKeys, cos.Verifier().String())
	}
	writePEM := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePEM("ossl.pem", "CERTIFICATE", ossl.Roots[0].Raw)
	writePEM("ts-root.pem", "CERTIFICATE", tsRoot.Raw)
	writePEM("ts-inter.pem", "CERTIFICATE", tsInter[0].Raw)
	rk, _ := x509.MarshalPKIXPublicKey(rekorKey)
	writePEM("rekor.pub", "PUBLIC KEY", rk)
	down := filesServer(t)
	cfgPath := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`data: %s
actor: alice
servers:
  - id: fs
    url: %s
witnesses:
%switness_policy: {threshold: 2, interval: 50ms}
anchors:
  interval: 1h
  timeout: 30s
  tsa:
    - {url: %s, roots: [ossl.pem]}
    - {url: %s, roots: [ts-root.pem], intermediates: [ts-inter.pem]}
  rekor: {url: %s, public_key: rekor.pub}
`, data, down, wcfg.String(), ossl.URL, tsURL, rekorURL)), 0o600)

	call, claim := recordClaim(t, cfgPath)

	vkeyFile := filepath.Join(data, logVKeyFile)
	for _, c := range []struct {
		name  string
		index uint64
		want  []string
	}{
		{"call", call, []string{fmt.Sprintf(`entry %d, a call of "fs__write_file" by "alice"`, call)}},
		{"claim", claim, []string{`a completion claim ("observed") on task "`, fmt.Sprintf("citing entries %d", call),
			"task.create entry", "task.accept entry", fmt.Sprintf(`cited entry %d: a call of "fs__write_file"`, call)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := filepath.Join(t.TempDir(), c.name)
			out, code := runCmd(t, "evidence", "--data", data, "--index", strconv.FormatUint(c.index, 10), "--out", ev, "--config", cfgPath)
			if code != 0 {
				t.Fatalf("provlog evidence: %d\n%s", code, out)
			}
			out, code = runCmd(t, "verify-evidence", "--vkey", vkeyFile, ev)
			if code != 0 {
				t.Fatalf("verify-evidence: %d\n%s", code, out)
			}
			t.Logf("verify-evidence:\n%s", out)
			want := append([]string{"OK: entry", `according to TSA "`, "according to Rekor", "index", "cosigned by 2 of 2 witnesses (witness.example/w1, witness.example/w2)", "is consistent with that checkpoint"}, c.want...)
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("verify-evidence output lacks %q", w)
				}
			}
			if strings.Contains(out, "missing:") {
				t.Errorf("evidence is missing parts:\n%s", out)
			}
			checkTokensWithOpenSSL(t, ev)
			checkReceiptIndependently(t, ev, k.vkey, witnessKeys, 2)
			checkCOSEWithGoCOSE(t, ev, k.vkey)
			flipEveryFile(t, ev, vkeyFile)
		})
	}

	// From the running sidecar over HTTP, the same evidence, byte for byte.
	local := filepath.Join(t.TempDir(), "local")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", strconv.FormatUint(claim, 10), "--out", local, "--config", cfgPath); code != 0 {
		t.Fatalf("provlog evidence --data: %s", out)
	}
	base, stop := startServe(t, "--config", cfgPath)
	tok, _ := os.ReadFile(filepath.Join(data, localToken))
	remote := filepath.Join(t.TempDir(), "remote")
	out, code := runCmd(t, "evidence", "--log", base, "--vkey", vkeyFile, "--token", strings.TrimSpace(string(tok)),
		"--index", strconv.FormatUint(claim, 10), "--out", remote, "--config", cfgPath)
	stop()
	if code != 0 {
		t.Fatalf("provlog evidence --log: %d\n%s", code, out)
	}
	sameTree(t, local, remote)

	// provlog prove --format cose gives a receipt go-cose verifies over
	// the root of the checkpoint provlog prove's tlog-proof carries.
	var cb, tb, errb bytes.Buffer
	ix := strconv.FormatUint(call, 10)
	if code := run(context.Background(), []string{"prove", "--data", data, "--index", ix, "--format", "cose"}, &cb, &errb); code != 0 {
		t.Fatalf("prove --format cose: %d %s", code, errb.String())
	}
	if code := run(context.Background(), []string{"prove", "--data", data, "--index", ix}, &tb, &errb); code != 0 {
		t.Fatalf("prove: %d %s", code, errb.String())
	}
	r, err := log.ParseReceipt(tb.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	c, err := log.ParseCheckpointNote(r.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	verifyGoCOSE(t, cb.Bytes(), c.Hash, k.vkey)
}

// filesServer is a downstream MCP server with a write_file tool.
func filesServer(t *testing.T) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file"}, func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	return down.URL
}

// recordClaim runs the sidecar in process: a task created and accepted,
// a call of fs__write_file, an observed claim citing it; then it waits
// for both witnesses to cosign the tree holding them, anchors it, and
// stops the sidecar. It returns the call's and the claim's indices.
func recordClaim(t *testing.T, cfgPath string) (call, claim uint64) {
	ctx := context.Background()
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := mustOpenSidecar(t, cfg)
	var once sync.Once
	defer once.Do(sc.close)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := sc.proxy.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "evidence-test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "write the report"})
	id := created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": id})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: map[string]any{"path": "r.md", "content": "# R", "api_key": "k"}})
	if err != nil || res.IsError {
		t.Fatalf("fs__write_file: %v %s", err, contentText(res))
	}
	rc, err := log.ParseReceipt([]byte(res.Meta["dev.provlog/receipt"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	es, err := sc.store.Entries(ctx, rc.Index, rc.Index+1)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Kind string `json:"kind"`
		Call uint64 `json:"call"`
	}
	json.Unmarshal(es[0], &e)
	call = rc.Index
	if e.Kind == "call.result" {
		call = e.Call
	}
	_, claimRC := callTool(t, cs, "report_completion", map[string]any{"task_id": id, "provenance": "observed",
		"summary": "wrote r.md", "evidence": []uint64{call}})
	crc, err := log.ParseReceipt([]byte(claimRC))
	if err != nil {
		t.Fatal(err)
	}
	size, _ := sc.seq.Checkpoint()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := log.ParseCheckpointNote(sc.witness.cos.Latest()); err == nil && c.Size >= size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the witnesses did not cosign size %d: %v", size, sc.witness.status())
		}
	}
	stored, err := sc.anchors.runner.AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := stored.Record; r.Size < size || len(r.Timestamps) != 2 || len(r.Tlogs) != 1 {
		t.Fatalf("anchored size %d (want >= %d), %d timestamps, %d tlogs", r.Size, size, len(r.Timestamps), len(r.Tlogs))
	}
	cs.Close()
	once.Do(sc.close)
	return call, crc.Index
}

// checkTokensWithOpenSSL runs `openssl ts -verify` on every token of the
// evidence over the checkpoint file, trusting only its trust roots.
func checkTokensWithOpenSSL(t *testing.T, ev string) {
	toks, _ := filepath.Glob(filepath.Join(ev, evidence.TimestampsDir, "*.tst"))
	if len(toks) != 2 {
		t.Fatalf("%d tokens in the evidence, want 2", len(toks))
	}
	for _, tok := range toks {
		cmd := exec.Command("openssl", "ts", "-verify", "-data", evidence.CheckpointFile, "-in", tok, "-token_in",
			"-CAfile", evidence.TSARootsFile, "-untrusted", strings.TrimSuffix(tok, ".tst")+".pem")
		cmd.Dir = ev
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Verification: OK") {
			t.Errorf("openssl ts -verify %s: %v\n%s", tok, err, out)
		}
	}
	// And fails over other data.
	cmd := exec.Command("openssl", "ts", "-verify", "-data", evidence.EntryFile, "-in", toks[0], "-token_in",
		"-CAfile", evidence.TSARootsFile, "-untrusted", strings.TrimSuffix(toks[0], ".tst")+".pem")
	cmd.Dir = ev
	if out, err := cmd.CombinedOutput(); err == nil && strings.Contains(string(out), "Verification: OK") {
		t.Errorf("openssl accepted a token over entry.json")
	}
}

// checkReceiptIndependently verifies receipt.tlog-proof for entry.json as
// c2sp.org/tlog-proof says, with x/mod's note (log signature), tlog
// (RFC 6962 inclusion) and cosignature/v1 checked by hand as
// c2sp.org/tlog-cosignature says: none of provlog's own code.
func checkReceiptIndependently(t *testing.T, ev, vkey string, witnessKeys []string, threshold int) {
	entry, _ := os.ReadFile(filepath.Join(ev, evidence.EntryFile))
	rb, _ := os.ReadFile(filepath.Join(ev, evidence.ReceiptFile))
	head, cpNote, ok := strings.Cut(string(rb), "\n\n")
	lines := strings.Split(head, "\n")
	if !ok || lines[0] != "c2sp.org/tlog-proof@v1" {
		t.Fatalf("not a tlog-proof: %q", head)
	}
	lines = lines[1:]
	if strings.HasPrefix(lines[0], "extra ") {
		lines = lines[1:]
	}
	idx, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "index "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var proof tlog.RecordProof
	for _, l := range lines[1:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != tlog.HashSize {
			t.Fatalf("proof line %q", l)
		}
		proof = append(proof, tlog.Hash(h))
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(cpNote), note.VerifierList(v))
	if err != nil {
		t.Fatalf("x/mod note does not open the checkpoint: %v", err)
	}
	body := strings.Split(n.Text, "\n")
	size, _ := strconv.ParseInt(body[1], 10, 64)
	root, _ := base64.StdEncoding.DecodeString(body[2])
	if body[0] != v.Name() || len(root) != tlog.HashSize {
		t.Fatalf("checkpoint body %q", n.Text)
	}
	if err := tlog.CheckRecord(proof, size, tlog.Hash(root), idx, tlog.RecordHash(entry)); err != nil {
		t.Fatalf("x/mod tlog: the inclusion proof does not hold: %v", err)
	}
	if err := tlog.CheckRecord(proof, size, tlog.Hash(root), idx, tlog.RecordHash(append(entry, ' '))); err == nil {
		t.Fatal("x/mod tlog: the proof holds for other bytes")
	}
	cosigned := 0
	for _, wk := range witnessKeys {
		if cosignedBy(t, n, wk) {
			cosigned++
		}
	}
	if cosigned < threshold {
		t.Fatalf("%d of the witnesses cosigned, want %d", cosigned, threshold)
	}
}

// cosignedBy checks a cosignature/v1 (type 0x04) by the witness key wk
// among the note's unverified signatures, as c2sp.org/tlog-cosignature
// says: Ed25519 over "cosignature/v1\ntime <t>\n" and the note text.
func cosignedBy(t *testing.T, n *note.Note, wk string) bool {
	parts := strings.SplitN(wk, "+", 3)
	key, _ := base64.StdEncoding.DecodeString(parts[2])
	hash, _ := strconv.ParseUint(parts[1], 16, 32)
	if len(key) != 33 || key[0] != 0x04 {
		t.Fatalf("witness key %q is not a cosignature/v1 key", wk)
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n\x04"), key[1:]...))
	if binary.BigEndian.Uint32(h[:4]) != uint32(hash) {
		t.Fatalf("witness key %q: key hash does not match", wk)
	}
	for _, s := range n.UnverifiedSigs {
		sig, _ := base64.StdEncoding.DecodeString(s.Base64)
		if s.Name != parts[0] || s.Hash != uint32(hash) || len(sig) != 4+8+64 {
			continue
		}
		ts := binary.BigEndian.Uint64(sig[4:12])
		msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts, n.Text)
		if ed25519.Verify(key[1:], []byte(msg), sig[12:]) {
			return true
		}
	}
	return false
}

// checkCOSEWithGoCOSE verifies receipt.cose with go-cose over the root the
// tlog-proof checkpoint names.
func checkCOSEWithGoCOSE(t *testing.T, ev, vkey string) {
	b, err := os.ReadFile(filepath.Join(ev, evidence.COSEFile))
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := os.ReadFile(filepath.Join(ev, evidence.CheckpointFile))
	c, err := log.ParseCheckpointNote(cp)
	if err != nil {
		t.Fatal(err)
	}
	verifyGoCOSE(t, b, c.Hash, vkey)
}

// verifyGoCOSE checks an RFC 9942 receipt with go-cose: its headers, and
// its signature over root.
func verifyGoCOSE(t *testing.T, b, root []byte, vkey string) {
	t.Helper()
	var m gocose.Sign1Message
	if err := m.UnmarshalCBOR(b); err != nil {
		t.Fatalf("go-cose: %v (%q)", err, b)
	}
	if m.Headers.Protected[int64(395)] != int64(1) {
		t.Errorf("vds %v", m.Headers.Protected[int64(395)])
	}
	parts := strings.SplitN(vkey, "+", 3)
	key, _ := base64.StdEncoding.DecodeString(parts[2])
	v, err := gocose.NewVerifier(gocose.AlgorithmEdDSA, ed25519.PublicKey(key[1:]))
	if err != nil {
		t.Fatal(err)
	}
	m.Payload = root
	if err := m.Verify(nil, v); err != nil {
		t.Fatalf("go-cose does not verify the receipt: %v", err)
	}
}

// flipEveryFile changes one byte in the middle of every file of the
// evidence in turn: verify-evidence exits 1 and names the file.
func flipEveryFile(t *testing.T, ev, vkeyFile string) {
	var files []string
	filepath.WalkDir(ev, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 20 {
		t.Fatalf("only %d files in the evidence", len(files))
	}
	for _, f := range files {
		orig, _ := os.ReadFile(f)
		b := bytes.Clone(orig)
		b[len(b)/2] ^= 0x01
		os.WriteFile(f, b, 0o644)
		rel, _ := filepath.Rel(ev, f)
		out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, ev)
		if code != 1 || !strings.Contains(out, "FAILED "+filepath.ToSlash(rel)+":") {
			t.Errorf("one byte of %s changed: exit %d, and the output does not name it:\n%s", rel, code, out)
		}
		os.WriteFile(f, orig, 0o644)
	}
	if out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, ev); code != 0 {
		t.Fatalf("restored evidence: %s", out)
	}
}

// sameTree requires two directories to hold the same files, byte for byte.
func sameTree(t *testing.T, a, b string) {
	read := func(root string) map[string]string {
		m := map[string]string{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(root, p)
				c, _ := os.ReadFile(p)
				m[rel] = string(c)
			}
			return nil
		})
		return m
	}
	x, y := read(a), read(b)
	if len(x) != len(y) {
		t.Errorf("%d files from the data dir, %d over HTTP", len(x), len(y))
	}
	for name, c := range x {
		if y[name] != c {
			t.Errorf("%s differs between the data dir's evidence and the one over HTTP", name)
		}
	}
}

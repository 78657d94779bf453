package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/log"
)

// forgedWitnessData is a data dir whose cosigned checkpoint a forger's
// witness (carrying the genuine witness's name) cosigned, as a forger
// holding the log's data could make it, and a config naming the forger's
// witness. It returns them and the genuine and forged witness keys.
func forgedWitnessData(t *testing.T) (data, cfg, genuine, forged string) {
	t.Helper()
	data = makeDataDir(t, 4)
	k, st := dataState(t, data)
	_, genuine, _ = log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	fkey, forged, _ := log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	forger, err := log.ParseCosignerKey(fkey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := log.ParseCheckpointNote(st.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := note.Sign(&note.Note{Text: cp.String()}, k.signer, forger)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, cosignedFile), cosigned, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = writeConfig(t, t.TempDir(), fmt.Sprintf("data: %s\nwitnesses:\n  - {url: http://127.0.0.1:9, vkey: %q}\nwitness_policy: {threshold: 1}\n", data, forged))
	return data, cfg, genuine, forged
}

// forgedWitnessEvidence writes, with provlog evidence, an evidence of
// forgedWitnessData's log. It returns the evidence, the log key's file and
// the genuine and forged witness keys.
func forgedWitnessEvidence(t *testing.T) (ev, vkeyFile, genuine, forged string) {
	t.Helper()
	data, cfg, genuine, forged := forgedWitnessData(t)
	ev = filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", "2", "--out", ev, "--config", cfg); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	return ev, filepath.Join(data, logVKeyFile), genuine, forged
}

// TestVerifyEvidencePinnedWitnesses: the forged evidence passes
// verify-evidence unpinned, which says its witness keys came from the
// directory; pinned to the genuine witness it fails; pinned to the keys
// it does hold (as a file) it passes.
func TestVerifyEvidencePinnedWitnesses(t *testing.T) {
	ev, vkeyFile, genuine, forged := forgedWitnessEvidence(t)
	out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, ev)
	if code != 0 || !strings.Contains(out, "cosigned by 1 of 1 witnesses (witness.example/w1)") ||
		!strings.Contains(out, "witness keys: from the directory (not pinned)") || !strings.Contains(out, "TSA roots: none in the directory (not pinned)") {
		t.Errorf("unpinned: %d\n%s", code, out)
	}
	out, code = runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--witness", genuine, ev)
	if code != 1 || !strings.Contains(out, "witnesses.txt") || !strings.Contains(out, "cosigned by 0 of the 1 witnesses you pinned") {
		t.Errorf("pinned to the genuine witness: %d\n%s", code, out)
	}
	wf := filepath.Join(t.TempDir(), "w.vkey")
	os.WriteFile(wf, []byte(forged+"\n"), 0o600)
	out, code = runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--witness", wf, "--witness-threshold", "1", ev)
	if code != 0 || !strings.Contains(out, "witness keys: pinned by you") {
		t.Errorf("pinned to the directory's witness: %d\n%s", code, out)
	}
}

// TestVerifyEvidencePinnedAnchors anchors a data dir with provlog anchor
// (an in-process TSA and a fake Rekor), writes evidence, and pins the TSA
// root and Rekor key: the right ones pass and say so; another TSA's root
// fails naming the token, another Rekor key naming the Rekor entry.
func TestVerifyEvidencePinnedAnchors(t *testing.T) {
	a := anchoredDataDir(t)
	data, cfg, root, rkey, otherRoot, otherKey := a.data, a.cfg, a.tsaRoot, a.rekorKey, a.otherRoot, a.otherKey
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", "2", "--out", ev, "--config", cfg); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	vkeyFile := filepath.Join(data, logVKeyFile)
	out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--tsa-roots", root, "--rekor-key", rkey, ev)
	if code != 0 || !strings.Contains(out, `according to TSA "Test TSA"`) || !strings.Contains(out, "TSA roots: pinned by you") ||
		!strings.Contains(out, "Rekor keys: pinned by you") || !strings.Contains(out, "witness keys: none in the directory (not pinned)") {
		t.Errorf("pinned: %d\n%s", code, out)
	}
	t.Logf("pinned:\n%s", out)
	if out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, ev); code != 0 || !strings.Contains(out, "TSA roots: from the directory (not pinned)") {
		t.Errorf("unpinned: %d\n%s", code, out)
	}
	out, code = runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--tsa-roots", otherRoot, ev)
	if code != 1 || !strings.Contains(out, "timestamps/0.tst") || !strings.Contains(out, "TSA roots you pinned") {
		t.Errorf("another TSA root: %d\n%s", code, out)
	}
	t.Logf("another TSA root:\n%s", out)
	out, code = runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--rekor-key", otherKey, ev)
	if code != 1 || !strings.Contains(out, "rekor/0.json") || !strings.Contains(out, "Rekor keys you pinned") {
		t.Errorf("another Rekor key: %d\n%s", code, out)
	}
}

// TestVerifyEvidenceBadPins: flag values that pin nothing usable are
// refused with exit 2 and say which flag is wrong.
func TestVerifyEvidenceBadPins(t *testing.T) {
	dir := t.TempDir()
	_, w1, _ := log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("not pem\n"), 0o600)
	_, vkey, _ := note.GenerateKey(rand.Reader, "provlog.example/x")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--witness", "nonsense"}, `--witness "nonsense" is neither`},
		{[]string{"--witness", w1, "--witness-threshold", "2"}, "--witness-threshold 2 is more than the 1 --witness keys"},
		{[]string{"--witness-threshold", "1"}, "--witness-threshold needs --witness keys"},
		{[]string{"--witness", w1, "--witness-threshold", "0"}, "--witness-threshold must be at least 1"},
		{[]string{"--witness", w1, "--witness", w1}, "listed twice"},
		{[]string{"--tsa-roots", filepath.Join(dir, "absent.pem")}, "absent.pem"},
		{[]string{"--tsa-roots", notPEM}, "holds no PEM certificate"},
		{[]string{"--rekor-key", notPEM}, "is not a PEM public key"},
	} {
		out, code := runCmd(t, append(append([]string{"verify-evidence", "--vkey", vkey}, c.args...), dir)...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, out)
		}
		// verify-proof takes the same witness flags, its threshold named
		// --threshold, and refuses them the same way.
		if !strings.HasPrefix(c.args[0], "--witness") {
			continue
		}
		var args []string
		for _, a := range c.args {
			args = append(args, strings.Replace(a, "--witness-threshold", "--threshold", 1))
		}
		want := strings.Replace(c.want, "--witness-threshold", "--threshold", 1)
		out, code = runCmd(t, append(append([]string{"verify-proof", "--vkey", vkey}, args...), filepath.Join(dir, "receipt"))...)
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("verify-proof %v: exit %d, want 2 and %q:\n%s", args, code, want, out)
		}
	}
}

// TestVerifyEvidenceJSON: with --json, verify-evidence prints one JSON
// verdict on stdout: the forged evidence pinned to the genuine witness is
// not ok and names witnesses.txt; unpinned it is ok with its report.
func TestVerifyEvidenceJSON(t *testing.T) {
	ev, vkeyFile, genuine, _ := forgedWitnessEvidence(t)
	verdict := func(args ...string) (checkVerdict, int) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"verify-evidence", "--json", "--vkey", vkeyFile}, args...), &out, &errb)
		var v checkVerdict
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("stdout is not one JSON verdict (%v):\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
		return v, code
	}
	v, code := verdict("--witness", genuine, ev)
	named := false
	for _, p := range v.Problems {
		named = named || p.Part == "witnesses.txt"
	}
	if code != 1 || v.OK || v.What != "evidence" || !named || v.Error != "" {
		t.Errorf("pinned to the genuine witness: exit %d, %+v", code, v)
	}
	v, code = verdict(ev)
	if code != 0 || !v.OK || len(v.Problems) != 0 || v.Report == nil {
		t.Errorf("unpinned: exit %d, %+v", code, v)
	}
	v, code = verdict(filepath.Join(t.TempDir(), "missing"))
	if code != 1 || v.OK || v.Error == "" {
		t.Errorf("missing directory: exit %d, %+v", code, v)
	}
}

// anchored is a data dir of four calls anchored once with provlog anchor
// (an in-process TSA and a fake Rekor), its config, the PEM files of the
// TSA's root and the Rekor's key, and those of another TSA and Rekor.
type anchored struct {
	data, cfg, tsaRoot, rekorKey, otherRoot, otherKey string
}

func anchoredDataDir(t *testing.T) anchored {
	t.Helper()
	a := anchored{data: makeDataDir(t, 4)}
	dir := t.TempDir()
	write := func(name string, b []byte) string { return writeFile(t, filepath.Join(dir, name), b) }
	tsa, rk := testtsa.New(t, "Test TSA"), fakerekor.New(t)
	a.tsaRoot = write("tsa-root.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}))
	a.rekorKey = write("rekor.pub", rk.PublicKeyPEM())
	a.otherRoot = write("other-root.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testtsa.New(t, "Other TSA").PKI.Root.Raw}))
	a.otherKey = write("other-rekor.pub", fakerekor.New(t).PublicKeyPEM())
	a.cfg = writeConfig(t, dir, fmt.Sprintf("data: %s\nanchors:\n  interval: 1h\n  timeout: 10s\n  tsa: [{url: %s, roots: [tsa-root.pem]}]\n  rekor: {url: %s, public_key: rekor.pub}\n", a.data, tsa.URL, rk.URL))
	if out, code := runCmd(t, "anchor", "--config", a.cfg); code != 0 {
		t.Fatalf("provlog anchor: %d\n%s", code, out)
	}
	return a
}

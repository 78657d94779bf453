package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// exportBundle exports data's whole log (with cfg, when given) and returns
// the bundle's directory.
func exportBundle(t *testing.T, data, cfg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bundle")
	args := []string{"export", "--data", data, "--out", out}
	if cfg != "" {
		args = append(args, "--config", cfg)
	}
	if msg, code := runCmd(t, args...); code != 0 {
		t.Fatalf("export: %d %s", code, msg)
	}
	return out
}

// TestVerifyBundlePinnedKey: a bundle a forger exported from a log of
// their own (every file consistent, signed by their key) verifies on its
// own, as it must; with the genuine log's key pinned it is refused,
// naming log.vkey, and the genuine log's bundle passes, saying the key
// was given. Before, verify-bundle took no key: an auditor could only
// compare the printed key by eye.
func TestVerifyBundlePinnedKey(t *testing.T) {
	genuine, forger := makeDataDir(t, 4), makeDataDir(t, 4)
	vkeyFile := filepath.Join(genuine, logVKeyFile)
	forged := exportBundle(t, forger, "")
	if out, code := runCmd(t, "verify-bundle", forged); code != 0 {
		t.Fatalf("the forger's bundle unpinned: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-bundle", "--vkey", vkeyFile, forged)
	if code != 1 || !strings.Contains(out, "log.vkey: is ") || !strings.Contains(out, "not the log key you gave") {
		t.Errorf("the forger's bundle with the genuine key pinned: %d\n%s", code, out)
	}
	out, code = runCmd(t, "verify-bundle", "--vkey", vkeyFile, exportBundle(t, genuine, ""))
	if code != 0 || !strings.Contains(out, "by a checkpoint signed with the log key you gave (") {
		t.Errorf("the genuine bundle with its key pinned: %d\n%s", code, out)
	}
	if out, code := runCmd(t, "verify-bundle", "--vkey", "nonsense", forged); code == 0 || !strings.Contains(out, `--vkey is neither a verifier key`) {
		t.Errorf("--vkey nonsense: %d\n%s", code, out)
	}
}

// TestVerifyBundlePinnedWitnesses: a forger holding the log's data has
// their own witness (carrying the genuine witness's name) cosign the
// checkpoint and exports under it: the bundle verifies on its own; pinned
// to the genuine witness it is refused; pinned to the forger's it passes
// and says the policy was given.
func TestVerifyBundlePinnedWitnesses(t *testing.T) {
	data, cfg, genuine, forged := forgedWitnessData(t)
	b := exportBundle(t, data, cfg)
	if out, code := runCmd(t, "verify-bundle", b); code != 0 || !strings.Contains(out, "cosigned by 1 of 1 witnesses (policy: 1 of 1): witness.example/w1 under the bundle's own witnesses.txt (not pinned: compare its keys with the witnesses' from a source you trust, or give --witness);") {
		t.Fatalf("unpinned: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-bundle", "--witness", genuine, b)
	if code != 1 || !strings.Contains(out, "checkpoint: is cosigned by 0 of 1 witnesses (policy: 1 of 1), fewer than the witness policy you gave requires") {
		t.Errorf("pinned to the genuine witness: %d\n%s", code, out)
	}
	out, code = runCmd(t, "verify-bundle", "--witness", forged, b)
	if code != 0 || !strings.Contains(out, "cosigned by 1 of 1 witnesses (policy: 1 of 1): witness.example/w1 under the witness policy you gave;") {
		t.Errorf("pinned to the bundle's own witness: %d\n%s", code, out)
	}
}

// TestVerifyBundlePinnedAnchors anchors a data dir (an in-process TSA and
// a fake Rekor) and exports it without a config, so the bundle has no
// trust/ files and its records carry their own roots and keys. Pinned to
// the right TSA root and Rekor key it verifies and says so; pinned to
// another TSA's root (its Rekor key the record's own) it is refused,
// naming the record and the roots given; so with another Rekor key.
func TestVerifyBundlePinnedAnchors(t *testing.T) {
	a := anchoredDataDir(t)
	data, root, rkey, otherRoot, otherKey := a.data, a.tsaRoot, a.rekorKey, a.otherRoot, a.otherKey
	b := exportBundle(t, data, "")
	if out, code := runCmd(t, "verify-bundle", b); code != 0 || !strings.Contains(out, "1 anchor records verified against the roots and keys the records carry") {
		t.Fatalf("unpinned: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-bundle", "--tsa-roots", root, "--rekor-key", rkey, b)
	if code != 0 || !strings.Contains(out, "1 anchor records verified against the TSA roots and Rekor keys you gave") {
		t.Errorf("pinned to the right authorities: %d\n%s", code, out)
	}
	out, code = runCmd(t, "verify-bundle", "--tsa-roots", otherRoot, b)
	if code != 1 || !strings.Contains(out, "anchors/") || !strings.Contains(out, "verifies by the TSA roots it carries but not by the ones you gave") {
		t.Errorf("another TSA's root: %d\n%s", code, out)
	}
	out, code = runCmd(t, "verify-bundle", "--rekor-key", otherKey, b)
	if code != 1 || !strings.Contains(out, "verifies by the Rekor keys it carries but not by the ones you gave") {
		t.Errorf("another Rekor key: %d\n%s", code, out)
	}
}

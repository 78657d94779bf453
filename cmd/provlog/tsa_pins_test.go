package main

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
)

// TestPinnedTSARootsPerTSA: the sidecar's config names a TSA at URL U
// (a front that passes every request to TSA 1) with TSA 1's root, so the
// record holds TSA 1's token under U. An auditor pins, with --tsa-roots, a
// file that names each root's TSA: TSA 0's root for U, TSA 1's for TSA 1's
// own URL. The token under U must verify only by U's root, as it would
// online, so verify-evidence and verify-bundle must fail it. On the base
// the file's roots were pooled and TSA 1's root let the token pass.
func TestPinnedTSARootsPerTSA(t *testing.T) {
	data := makeDataDir(t, 4)
	dir := t.TempDir()
	tsa0, tsa1 := testtsa.New(t, "TSA 0"), testtsa.New(t, "TSA 1")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Post(tsa1.URL, r.Header.Get("Content-Type"), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer front.Close()
	root0 := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa0.PKI.Root.Raw})
	root1 := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa1.PKI.Root.Raw})
	writeFile(t, filepath.Join(dir, "root1.pem"), root1)
	cfg := writeConfig(t, dir, fmt.Sprintf("data: %s\nanchors:\n  interval: 1h\n  timeout: 10s\n  tsa: [{url: %s, roots: [root1.pem]}]\n", data, front.URL))
	if out, code := runCmd(t, "anchor", "--config", cfg); code != 0 {
		t.Fatalf("provlog anchor: %d\n%s", code, out)
	}
	// Each root named by the TSA it is pinned for, as RFC 7468 allows
	// text before a PEM block (openssl reads the file as it is).
	named := writeFile(t, filepath.Join(dir, "named.pem"),
		fmt.Appendf(nil, "tsa: %s\n%stsa: %s\n%s", front.URL, root0, tsa1.URL, root1))
	if b, _ := os.ReadFile(named); !strings.Contains(string(b), "BEGIN CERTIFICATE") {
		t.Fatal("no roots written")
	}
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", "2", "--out", ev, "--config", cfg); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	vkeyFile := filepath.Join(data, logVKeyFile)
	out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--tsa-roots", named, ev)
	if code != 1 || !strings.Contains(out, "timestamps/0.tst") {
		t.Errorf("verify-evidence, TSA 1's token under %s, whose pinned root is TSA 0's: exit %d, want 1 naming timestamps/0.tst\n%s", front.URL, code, out)
	}
	right := writeFile(t, filepath.Join(dir, "right.pem"), fmt.Appendf(nil, "tsa: %s\n%stsa: %s\n%s", front.URL, root1, tsa0.URL, root0))
	if out, code := runCmd(t, "verify-evidence", "--vkey", vkeyFile, "--tsa-roots", right, ev); code != 0 || !strings.Contains(out, "TSA roots: pinned by you") {
		t.Errorf("verify-evidence, the token's root pinned for its URL: exit %d, want 0\n%s", code, out)
	}
	b := exportBundle(t, data, "")
	if out, code := runCmd(t, "verify-bundle", "--tsa-roots", right, b); code != 0 {
		t.Errorf("verify-bundle, the token's root pinned for its URL: exit %d, want 0\n%s", code, out)
	}
	out, code = runCmd(t, "verify-bundle", "--tsa-roots", named, b)
	if code != 1 || !strings.Contains(out, "anchors/") {
		t.Errorf("verify-bundle, TSA 1's token under %s, whose pinned root is TSA 0's: exit %d, want 1 naming the record\n%s", front.URL, code, out)
	}
}

// TestBundleTrustPerTSA: a bundle exported under a config that pins
// TSA 0's root for URL U and TSA 1's for TSA 1's own URL carries those
// roots in trust/tsa-roots.pem; the record holds TSA 1's token under U
// (made under an earlier config, through a front passing U's requests
// to TSA 1). verify-bundle must check the token against U's root alone,
// as `provlog audit --config` does, and fail it. On the base the bundle's
// roots were written and read pooled, and the bundle verified.
func TestBundleTrustPerTSA(t *testing.T) {
	data := makeDataDir(t, 4)
	dir := t.TempDir()
	tsa0, tsa1 := testtsa.New(t, "TSA 0"), testtsa.New(t, "TSA 1")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Post(tsa1.URL, r.Header.Get("Content-Type"), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer front.Close()
	root0 := writeFile(t, filepath.Join(dir, "root0.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa0.PKI.Root.Raw}))
	root1 := writeFile(t, filepath.Join(dir, "root1.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa1.PKI.Root.Raw}))
	config := func(name, tsas string) string {
		return writeConfig(t, filepath.Join(dir, name), fmt.Sprintf("data: %s\nanchors:\n  interval: 1h\n  timeout: 10s\n  tsa: [%s]\n", data, tsas))
	}
	if out, code := runCmd(t, "anchor", "--config", config("then", fmt.Sprintf("{url: %s, roots: [%s]}", front.URL, root1))); code != 0 {
		t.Fatalf("provlog anchor: %d\n%s", code, out)
	}
	now := config("now", fmt.Sprintf("{url: %s, roots: [%s]}, {url: %s, roots: [%s]}", front.URL, root0, tsa1.URL, root1))
	if out, code := runCmd(t, "audit", "--data", data, "--config", now); code == 0 {
		t.Fatalf("audit under the config pinning TSA 0's root for %s passed:\n%s", front.URL, out)
	}
	b := exportBundle(t, data, now)
	if out, code := runCmd(t, "verify-bundle", b); code != 1 || !strings.Contains(out, "anchors/") {
		t.Errorf("verify-bundle of a bundle whose trust/tsa-roots.pem pins TSA 0's root for %s, whose record holds TSA 1's token under it: exit %d, want 1 naming the record\n%s", front.URL, code, out)
	}
}

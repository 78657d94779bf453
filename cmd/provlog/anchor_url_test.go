package main

// Credentials in an anchoring authority's URL (basic auth, an API key in
// the query: the anchor config has no other place for them) never leave
// the process: /metrics and /healthz, public both, and the status, log
// lines and anchor records show the URL redacted by log.RedactURL.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
)

func TestAnchorURLCredentialsRedacted(t *testing.T) {
	dir := t.TempDir()
	rk := fakerekor.New(t)
	if err := os.WriteFile(filepath.Join(dir, "rekor.pub"), rk.PublicKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "S3cretAnchorPass"
	u := strings.Replace(rk.URL, "http://", "http://anchoruser:"+secret+"@", 1) + "/?api_key=" + secret + "Q"
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("data: %s\nanchors:\n  interval: 1h\n  rekor:\n    url: %s\n    public_key: rekor.pub\n",
		filepath.Join(dir, "data"), u)), 0o600)
	base, _ := startServe(t, "--config", cfg)
	for _, p := range []string{"/metrics", "/healthz"} {
		resp, err := http.Get(base + p) // no token: both are public
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), secret) {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, secret) {
					t.Errorf("%s (public, %s) serves the anchoring authority's password: %.200s", p, resp.Status, l)
					break
				}
			}
		}
	}
}

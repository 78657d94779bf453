package main

// Probe (secrets): credentials in an anchoring authority's URL are served
// to anyone by /metrics (and /healthz, stderr once it fails).
//
// What is wrong: anchors.tsa[].url and anchors.rekor.url have no field
// for credentials, so an operator of a TSA or Rekor that wants them
// (basic auth, an API key in the query) puts them in the URL. The
// sidecar then prints that URL as configured: /metrics, which needs no
// token, writes it in every provlog_anchor_failures{url=...} line
// (anchoring.writeMetrics, cmd/provlog/anchor_wiring.go), /healthz,
// public too, in "... failed N times running" (health.go), and the
// anchor status and stderr with it. Go's own HTTP errors redact the
// password ("user:***@"), provlog's lines do not.
//
// Observed: GET /metrics and GET /healthz, without any token, both answer
// with "anchoruser:S3cretAnchorPass" (the metrics label, and the health
// document's anchoring.authorities[].url) before anything failed.
//
// Fix: show authority URLs redacted (url.URL.Redacted(), and drop the
// query) wherever they leave the process (metrics, health, status,
// stderr); better, refuse userinfo in these URLs at config load and give
// the anchor config a headers/credentials_file field.

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

func TestProbeAnchorURLCredentialsOnPublicMetrics(t *testing.T) {
	dir := t.TempDir()
	rk := fakerekor.New(t)
	if err := os.WriteFile(filepath.Join(dir, "rekor.pub"), rk.PublicKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "S3cretAnchorPass"
	u := strings.Replace(rk.URL, "http://", "http://anchoruser:"+secret+"@", 1)
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

package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestLogURLWithQuery: --log naming a sidecar by a URL with a query (an
// API key a gateway in front of it wants and takes off) reads the
// sidecar's log API at its paths. Before, the path went after the query
// (/?k=K/log/...): prove and audit got a 404.
func TestLogURLWithQuery(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	base, _ := startServe(t, "--data", data)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROVLOG_TOKEN", strings.TrimSpace(string(tok)))
	target, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int64
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("k") != "K" {
			refused.Add(1)
			http.Error(w, "no API key", http.StatusForbidden)
			return
		}
		q.Del("k") // the sidecar refuses a parameter it does not know
		r.URL.RawQuery = q.Encode()
		rp.ServeHTTP(w, r)
	}))
	defer gw.Close()
	for _, u := range []string{gw.URL + "/?k=K", gw.URL + "?k=K"} {
		if out, code := runCmd(t, "prove", "--log", u, "--index", "0"); code != 0 || !strings.HasPrefix(out, log.ReceiptHeader) {
			t.Errorf("prove --log %s: %d %s", u, code, out)
		}
		if out, code := runCmd(t, "audit", "--log", u, "--vkey", filepath.Join(data, logVKeyFile)); code != 0 {
			t.Errorf("audit --log %s: %d %s", u, code, out)
		}
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the gateway refused %d requests without the URL's query", n)
	}
}

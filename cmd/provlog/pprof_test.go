package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestServePprof: serve --pprof serves the profiling endpoints on the
// loopback address given, apart from the API (which does not serve them);
// an address that is not loopback is refused before anything is made.
func TestServePprof(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	paddr := freeAddr(t)
	base, stop := startServe(t, "--data", data, "--pprof", paddr)
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + paddr + "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: %d %.200s", code, body)
	}
	if code, body := get("http://" + paddr + "/debug/pprof/profile?seconds=1"); code != 200 || len(body) == 0 {
		t.Errorf("CPU profile: %d, %d bytes", code, len(body))
	}
	if code, _ := get(base + "/debug/pprof/"); code == 200 {
		t.Errorf("the API serves /debug/pprof/")
	}
	stop()

	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "nohost"} {
		other := filepath.Join(t.TempDir(), "data")
		out, code := runCmd(t, "serve", "--data", other, "--http", freeAddr(t), "--pprof", addr)
		if code != 2 || !strings.Contains(out, "--pprof") {
			t.Errorf("--pprof %s: exit %d\n%s", addr, code, out)
		}
		if m, _ := filepath.Glob(filepath.Join(other, "*")); len(m) > 0 {
			t.Errorf("--pprof %s: refused, yet the data dir holds %v", addr, m)
		}
	}
}

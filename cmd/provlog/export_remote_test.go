package main

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportRemote exports from a running sidecar over its log API and
// checks the bundle, then compares it with the same range exported from
// the data dir once the sidecar stopped.
func TestExportRemote(t *testing.T) {
	data := makeDataDir(t, 700) // two full tiles and a partial one
	base, stop := startServe(t, "--data", data)
	token, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	vkey := filepath.Join(data, logVKeyFile)
	if out, code := runCmd(t, "export", "--log", base, "--out", filepath.Join(t.TempDir(), "b")); code != 2 || !strings.Contains(out, "--vkey is required with --log") {
		t.Fatalf("export --log without --vkey: %d %s", code, out)
	}
	if out, code := runCmd(t, "export", "--log", base, "--vkey", vkey, "--out", filepath.Join(t.TempDir(), "b")); code == 0 || !strings.Contains(out, "reader token") {
		t.Fatalf("export --log without a token: %d %s", code, out)
	}
	// Entries changed on the way (the tiles and the checkpoint not) are
	// refused, and no bundle is written; so is a replay of them.
	changed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(base)
			pr.SetURL(u)
		}}).ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if strings.Contains(r.URL.Path, "/entries/") || strings.HasPrefix(r.URL.Path, "/log/entry/") {
			body = bytes.ReplaceAll(body, []byte(`"lookup"`), []byte(`"lookuq"`))
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	defer changed.Close()
	tampered := filepath.Join(t.TempDir(), "tampered")
	out, code := runCmd(t, "export", "--log", changed.URL, "--vkey", vkey, "--token", strings.TrimSpace(string(token)), "--from", "300", "--to", "400", "--out", tampered)
	if code == 0 || !strings.Contains(out, "is not the one its checkpoint's tree holds there") {
		t.Errorf("export of changed entries: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(tampered, "provenance.jsonl")); err == nil {
		t.Error("a bundle of changed entries was written")
	}
	cfgPath := filepath.Join(t.TempDir(), "replay.yaml")
	os.WriteFile(cfgPath, []byte("servers:\n  - {id: ensembl, url: http://127.0.0.1:1/mcp, replay: true}\n"), 0o600)
	out, code = runCmd(t, "replay", "--log", changed.URL, "--token", strings.TrimSpace(string(token)), "--config", cfgPath, "--from", "300", "--to", "310")
	if code == 0 || !strings.Contains(out, "is not the one its checkpoint's tree holds there") {
		t.Errorf("replay of changed entries: %d %s", code, out)
	}

	remote := filepath.Join(t.TempDir(), "remote")
	args := []string{"export", "--log", base, "--vkey", vkey, "--token", strings.TrimSpace(string(token)), "--from", "300", "--to", "400", "--out", remote}
	if out, code := runCmd(t, args...); code != 0 {
		t.Fatalf("export --log: %s", out)
	}
	stop()
	if out, code := runCmd(t, "verify-bundle", remote); code != 0 || !strings.HasPrefix(out, "OK: 100 entries [300, 400)") {
		t.Fatalf("verify-bundle of the remote export: %d %s", code, out)
	}
	local := filepath.Join(t.TempDir(), "local")
	if out, code := runCmd(t, "export", "--data", data, "--from", "300", "--to", "400", "--out", local); code != 0 {
		t.Fatalf("export --data: %s", out)
	}
	for _, f := range []string{"tree.json", "provenance.jsonl"} {
		a, errA := os.ReadFile(filepath.Join(remote, f))
		b, errB := os.ReadFile(filepath.Join(local, f))
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s differs between the remote and the local export (%v, %v)", f, errA, errB)
		}
	}
}

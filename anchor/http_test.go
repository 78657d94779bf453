package anchor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/online"
)

func TestHandler(t *testing.T) {
	e := newEnv(t, 1, true)
	r := e.runner(nil)
	var names []string
	for range 3 {
		st, err := r.AnchorNow(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, st.Name)
		e.appendN(1)
	}
	h := online.NewHandler(e.records, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer ok" })
	get := func(path string, auth bool) (int, []byte) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer ok")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, b
	}
	if code, _ := get("/log/anchors", false); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", code)
	}
	code, body := get("/log/anchors", true)
	var list []online.Summary
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 3 {
		t.Fatalf("list: %d %s", code, body)
	}
	// Each summary names the sidecar whose data dir keeps the record, as
	// its anchor entry does (on a shared log, so a reader can tell whose
	// records a listing shows).
	sidecar, err := anchor.ReadSidecar(e.records.Dir())
	if err != nil || sidecar == "" {
		t.Fatalf("sidecar id %q: %v", sidecar, err)
	}
	for i, s := range list {
		if s.Name != names[i] || s.URL != "/log/anchors/"+names[i] || len(s.Timestamps) != 1 || len(s.Tlogs) != 1 || s.RecordHash == "" || s.Sidecar != sidecar {
			t.Errorf("summary %d: %+v, want sidecar %s", i, s, sidecar)
		}
	}
	code, body = get("/log/anchors?after="+names[0]+"&limit=1", true)
	if json.Unmarshal(body, &list) != nil || len(list) != 1 || list[0].Name != names[1] {
		t.Errorf("page: %d %s", code, body)
	}
	code, body = get("/log/anchors/"+names[2], true)
	want, _ := os.ReadFile(filepath.Join(e.records.Dir(), names[2]))
	if code != http.StatusOK || string(body) != string(want) {
		t.Errorf("record: %d", code)
	}
	for _, p := range []string{"/log/anchors/../log.key", "/log/anchors/nope.json", "/log/anchors?after=nope"} {
		if code, _ := get(p, true); code != http.StatusNotFound {
			t.Errorf("%s: %d", p, code)
		}
	}
	for _, p := range []string{"/log/anchors?limit=0", "/log/anchors?limit=x", "/log/anchors?x=1"} {
		if code, _ := get(p, true); code != http.StatusBadRequest {
			t.Errorf("%s: %d", p, code)
		}
	}
}

func TestConfigResolve(t *testing.T) {
	e := newEnv(t, 1, true)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "root.pem"), []byte(e.cfg.TSA[0].Roots[0]), 0o600)
	os.WriteFile(filepath.Join(dir, "rekor.pub"), []byte(e.cfg.Rekor.PublicKey), 0o600)
	good := online.Config{
		TSA:   []online.TSAConfig{{URL: e.tsas[0].URL, Roots: []string{"root.pem"}}},
		Rekor: &online.RekorConfig{URL: e.rekor.URL + "/", PublicKey: "rekor.pub"},
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	res, err := good.Resolve(read)
	if err != nil {
		t.Fatal(err)
	}
	if res.Interval != online.DefaultInterval || res.Timeout != online.DefaultTimeout || len(res.Trust.TSARoots) != 1 ||
		len(res.Trust.RekorKeys) != 1 || res.Rekor.URL != e.rekor.URL {
		t.Errorf("resolved %+v", res)
	}
	for _, tc := range []struct {
		edit func(*online.Config)
		want string
	}{
		{func(c *online.Config) { c.TSA, c.Rekor = nil, nil }, "at least one"},
		{func(c *online.Config) { c.Interval = time.Millisecond }, "interval"},
		{func(c *online.Config) { c.TSA[0].URL = "ftp://x" }, "tsa 0: url"},
		{func(c *online.Config) { c.TSA[0].Roots = nil }, "roots"},
		{func(c *online.Config) { c.TSA[0].Roots = []string{"missing.pem"} }, "missing.pem"},
		{func(c *online.Config) { c.TSA[0].Roots = []string{"rekor.pub"} }, "no PEM certificate"},
		{func(c *online.Config) { c.Rekor.PublicKey = "" }, "public_key"},
		{func(c *online.Config) { c.Rekor.PublicKey = "root.pem" }, "not a PEM public key"},
	} {
		c := good
		c.TSA = append([]online.TSAConfig{}, good.TSA...)
		r := *good.Rekor
		c.Rekor = &r
		tc.edit(&c)
		if _, err := c.Resolve(read); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error mentioning %q, got %v", tc.want, err)
		}
	}
	// Without a reader only inline PEM is taken: the package reads no files.
	if _, err := good.Resolve(nil); err == nil || !strings.Contains(err.Error(), "not inline PEM") {
		t.Errorf("Resolve(nil) of a config naming files: %v", err)
	}
}

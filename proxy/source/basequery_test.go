package source_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/provlog/provlog/proxy/source"
)

// TestBaseKeepsQuery: a preset's "base" with a query (an API key a mirror
// or gateway wants) keeps it: the request carries base's query and the
// preset's, under base's path. And the key is never shown: not in the
// log line of a source that failed, nor in the error of Try, for a base
// or a url: that carries it.
func TestBaseKeepsQuery(t *testing.T) {
	const key = "K3Y-base-5d1c"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.String())
		q := r.URL.Query()
		if r.URL.Path != "/mirror/entrez/eutils/einfo.fcgi" || q.Get("api_key") != key || q.Get("db") != "pubmed" {
			http.Error(w, "want the mirror's path, its key and the preset's query", http.StatusForbidden)
			return
		}
		io.WriteString(w, `{"einforesult":{"dbinfo":[{"dbbuild":"Build-1"}]}}`)
	}))
	defer srv.Close()

	r, err := source.New(source.Config{Preset: "eutils", Options: map[string]string{"base": srv.URL + "/mirror?api_key=" + key}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := r.Try(context.Background(), nil); err != nil || rel != "Build-1" {
		t.Errorf("eutils under a base with a query: %q, %v; want Build-1 (requests: %q)", rel, err, got)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer down.Close()
	for name, cfg := range map[string]source.Config{
		"base": {Preset: "eutils", Options: map[string]string{"base": down.URL + "/mirror?api_key=" + key}},
		"url":  {Type: source.TypeHTTPJSON, URL: down.URL + "/v?api_key=" + key, Path: "v"},
	} {
		var logged bytes.Buffer
		r, err := source.New(cfg, nil, slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Try(context.Background(), nil)
		if err == nil {
			t.Fatalf("%s: a source answering 500 gave a release", name)
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("%s: Try's error shows the key: %v", name, err)
		}
		if r.Resolve(context.Background(), nil) != "" {
			t.Fatalf("%s: a source answering 500 gave a release", name)
		}
		if strings.Contains(logged.String(), key) {
			t.Errorf("%s: the log line shows the key: %s", name, logged.String())
		}
		if !strings.Contains(logged.String(), "500") {
			t.Errorf("%s: the log line does not say what failed: %s", name, logged.String())
		}
	}
}

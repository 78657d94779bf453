package source_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/proxy/source"
)

// sources answer each preset's request in the shape the source's API
// documents (abridged), keyed by URL path.
var sources = map[string]struct {
	preset, path, body string
	header             map[string]string
	opts               map[string]string
	want               string
}{
	"eutils":         {"eutils", "/entrez/eutils/einfo.fcgi", `{"header":{"type":"einfo","version":"0.3"},"einforesult":{"dbinfo":[{"dbname":"pubmed","menuname":"PubMed","count":"38000000","lastupdate":"2025/03/01 05:12","dbbuild":"Build-2025.03.01.05.12"}]}}`, nil, nil, "Build-2025.03.01.05.12"},
	"geo":            {"geo", "/entrez/eutils/einfo.fcgi", `{"einforesult":{"dbinfo":[{"dbname":"gds","dbbuild":"Build250301-0512.1","lastupdate":"2025/03/01 05:12"}]}}`, nil, nil, "Build250301-0512.1"},
	"opentargets":    {"opentargets", "/api/v4/graphql", `{"data":{"meta":{"dataVersion":{"year":"25","month":"03"}}}}`, nil, nil, "25.03"},
	"clinicaltrials": {"clinicaltrials", "/api/v2/version", `{"apiVersion":"2.0.3","dataTimestamp":"2025-03-04T09:00:05"}`, nil, nil, "2025-03-04T09:00:05"},
	"uniprot":        {"uniprot", "/uniprotkb/search", `{"results":[{"primaryAccession":"P04637"}]}`, map[string]string{"X-UniProt-Release": "2025_01", "X-UniProt-Release-Date": "05-February-2025"}, nil, "2025_01"},
	"ensembl":        {"ensembl", "/info/data", `{"releases":[113]}`, nil, nil, "113"},
	"chembl":         {"chembl", "/chembl/api/data/status.json", `{"activities":24267312,"chembl_db_version":"ChEMBL_35","chembl_release_date":"2024-12-01","status":"UP"}`, nil, nil, "ChEMBL_35"},
	"string":         {"string", "/api/json/version", `[{"string_version":"12.0","stable_address":"https://version-12-0.string-db.org"}]`, nil, nil, "12.0"},
	"reactome":       {"reactome", "/ContentService/data/database/version", `91`, nil, nil, "91"},
	"hgnc":           {"hgnc", "/info", `{"lastModified":"2025-03-04T18:21:10.000Z","numDoc":44000,"searchableFields":["symbol"]}`, nil, nil, "2025-03-04T18:21:10.000Z"},
	"ols":            {"ols", "/ols4/api/ontologies/go", `{"ontologyId":"go","config":{"id":"go","version":"2025-02-06","title":"Gene Ontology"}}`, nil, map[string]string{"ontology": "go"}, "2025-02-06"},
	"kegg":           {"kegg", "/info/kegg", "kegg             Kyoto Encyclopedia of Genes and Genomes\nkegg             Release 113.0+/03-04, Mar 25\n                 Kanehisa Laboratories\n", nil, nil, "113.0+/03-04,"},
}

func TestPresets(t *testing.T) {
	for name, s := range sources {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != s.path {
					http.NotFound(w, r)
					return
				}
				if name == "opentargets" {
					b, _ := io.ReadAll(r.Body)
					if r.Method != "POST" || !strings.Contains(string(b), "dataVersion") {
						http.Error(w, "want a GraphQL POST", 400)
						return
					}
				}
				for k, v := range s.header {
					w.Header().Set(k, v)
				}
				io.WriteString(w, s.body)
			}))
			defer srv.Close()
			opts := map[string]string{"base": srv.URL}
			for k, v := range s.opts {
				opts[k] = v
			}
			r, err := source.New(source.Config{Preset: s.preset, Options: opts}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Try(context.Background(), nil)
			if err != nil || got != s.want {
				t.Errorf("got %q, %v; want %q", got, err, s.want)
			}
		})
	}
	for _, n := range source.Names() {
		if _, ok := sources[n]; !ok {
			t.Errorf("preset %s has no test", n)
		}
	}
}

func TestGeneric(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "rel.sh")
	os.WriteFile(exe, []byte("#!/bin/sh\necho v42\necho ignored\n"), 0o755)
	result := json.RawMessage(`{"content":[{"type":"text","text":"x"}],"structuredContent":{"meta":{"release":"R7"}}}`)
	for _, c := range []struct {
		cfg  source.Config
		want string
	}{
		{source.Config{Type: "static", Value: "2024-12"}, "2024-12"},
		{source.Config{Type: "exec", Command: []string{exe}}, "v42"},
		{source.Config{Type: "field", Path: "structuredContent.meta.release"}, "R7"},
		{source.Config{Type: "field", Path: "structuredContent.meta.release", Match: `R(\d+)`}, "7"},
	} {
		r, err := source.New(c.cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Resolve(context.Background(), result); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.cfg, got, c.want)
		}
	}
}

// TestNeverFails: a hung or broken source gives no release, promptly; a
// good answer is cached for the TTL.
func TestNeverFails(t *testing.T) {
	var hits atomic.Int32
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/hang":
			<-block
		case "/bad":
			io.WriteString(w, "{not json")
		default:
			io.WriteString(w, `{"v":"1"}`)
		}
	}))
	defer srv.Close()
	defer close(block)
	for _, p := range []string{"/hang", "/bad", "/404"} {
		r, _ := source.New(source.Config{Type: "http-json", URL: srv.URL + p, Path: "v", Timeout: 100 * time.Millisecond}, nil, nil)
		t0 := time.Now()
		if got := r.Resolve(context.Background(), nil); got != "" && p != "/404" {
			t.Errorf("%s: got %q", p, got)
		}
		if time.Since(t0) > 2*time.Second {
			t.Errorf("%s: took %s", p, time.Since(t0))
		}
	}
	r, _ := source.New(source.Config{Type: "http-json", URL: srv.URL + "/ok", Path: "v", TTL: time.Hour}, nil, nil)
	n := hits.Load()
	for range 3 {
		if got := r.Resolve(context.Background(), nil); got != "1" {
			t.Fatalf("got %q", got)
		}
	}
	if hits.Load()-n != 1 {
		t.Errorf("%d requests for 3 resolves within the TTL, want 1", hits.Load()-n)
	}
	if _, err := source.New(source.Config{Preset: "nope"}, nil, nil); err == nil {
		t.Error("unknown preset accepted")
	}
}

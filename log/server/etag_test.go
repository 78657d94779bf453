package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestConditionalGet: the checkpoint, hash tiles, entry bundles and
// entries carry a strong ETag; a GET or HEAD whose If-None-Match names it
// (alone, in a list, weak, or "*") is answered 304 with no body and the
// same ETag and Cache-Control, any other gets the whole answer. A Range
// is ignored: the whole answer, 200.
func TestConditionalGet(t *testing.T) {
	for _, b := range backends {
		if b.name != "pebble" {
			continue
		}
		store, _ := b.open(t)
		l := buildLog(t, store, 300)
		srv := httptest.NewServer(NewAPI(APIOptions{Store: l.store, Seq: l.seq}))
		defer srv.Close()
		c := &client{t: t, base: srv.URL}
		paths := []string{
			"/log/checkpoint",
			"/log/" + log.Tile{Level: 0, N: 0, W: log.TileWidth}.Path(),
			"/log/" + log.Tile{Level: 0, N: 1, W: 300 - log.TileWidth}.Path(),
			"/log/" + log.Tile{Level: -1, N: 0, W: log.TileWidth}.Path(),
			"/log/" + log.Tile{Level: -1, N: 1, W: 300 - log.TileWidth}.Path(),
			"/log/entry/7",
		}
		etags := map[string]string{}
		for _, path := range paths {
			get, body := c.get(path)
			etag := get.Header.Get("ETag")
			if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Errorf("GET %s: ETag %q, want a strong entity tag", path, etag)
				continue
			}
			for other, p := range etags {
				if other == etag {
					t.Errorf("GET %s and %s: one ETag %s", path, p, etag)
				}
			}
			etags[etag] = path
			for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
				for _, method := range []string{http.MethodGet, http.MethodHead} {
					req, _ := http.NewRequest(method, srv.URL+path, nil)
					req.Header.Set("If-None-Match", inm)
					resp, b := c.send(req)
					if resp.StatusCode != http.StatusNotModified || len(b) != 0 {
						t.Errorf("%s %s, If-None-Match: %s: %s with %d bytes, want 304 without a body", method, path, inm, resp.Status, len(b))
					}
					if got := resp.Header.Get("ETag"); got != etag {
						t.Errorf("%s %s, If-None-Match: %s: ETag %q, want %q", method, path, inm, got, etag)
					}
					if got, want := resp.Header.Get("Cache-Control"), get.Header.Get("Cache-Control"); got != want {
						t.Errorf("%s %s, If-None-Match: %s: Cache-Control %q, want %q", method, path, inm, got, want)
					}
				}
			}
			for _, inm := range []string{`"x"`, etag[:len(etag)-1] + `x"`, etag[1 : len(etag)-1]} {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
				req.Header.Set("If-None-Match", inm)
				if resp, b := c.send(req); resp.StatusCode != http.StatusOK || string(b) != string(body) {
					t.Errorf("GET %s, If-None-Match: %s: %s, want 200 and the whole answer", path, inm, resp.Status)
				}
			}
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Range", "bytes=0-1")
			if resp, b := c.send(req); resp.StatusCode != http.StatusOK || string(b) != string(body) {
				t.Errorf("GET %s, Range: bytes=0-1: %s with %d bytes, want 200 and the whole answer (%d bytes)", path, resp.Status, len(b), len(body))
			}
		}
	}
}

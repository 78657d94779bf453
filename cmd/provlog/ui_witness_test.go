package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// TestUIServerNamedWitness: a server (or a MITM, or a bundle's author)
// that names a witness key of its own and cosigns the checkpoint with it
// must not get a bare "✓ cosignature verifies": a cosignature is what
// protects against a split view, and one by a key only the server names
// is the server's word. The row says whose key it is: one this server
// names, or, given as #witness= (like #vkey=), one the reader gave.
func TestUIServerNamedWitness(t *testing.T) {
	l := newUILog(t, false)
	skey, wvkey, err := log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	if err != nil {
		t.Fatal(err)
	}
	cos, err := log.ParseCosignerKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		l.sc.handler().ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		switch r.URL.Path {
		case "/ui/log.json":
			var info map[string]any
			json.Unmarshal(body, &info)
			info["witnesses"] = []string{wvkey}
			body, _ = json.Marshal(info)
		case "/log/proof/inclusion":
			// Cosign the receipt's checkpoint with the server's own key.
			i := bytes.Index(body, []byte("\n\n"))
			cp := body[i+2:]
			text := cp[:bytes.LastIndex(cp, []byte("\n\n"))+1]
			signed, err := note.Sign(&note.Note{Text: string(text)}, cos)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			body = append(body, signed[len(text)+1:]...)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d&vkey=%s", swap.URL, l.token, l.claim, url.QueryEscape(l.vkey)))
	if v != "true" {
		t.Fatalf("claim with the reader's key: data-verified=%s: %s", v, txt)
	}
	var rows []string
	if err := p.Eval(ctx, `[...document.querySelectorAll("#checkpoint tbody tr")].map(r => r.innerText)`, &rows); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		if !strings.Contains(r, "witness.example/w1") {
			continue
		}
		found = true
		if strings.Contains(r, "✓") && !strings.Contains(r, "server") {
			t.Errorf("a cosignature by a witness key only the server names is shown verified, without saying whose key it is: %q", r)
		}
	}
	if !found {
		t.Fatalf("no row for the server's witness: %q", rows)
	}
	// Given by the reader, the same key's cosignature is theirs.
	v, txt = verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d&vkey=%s&witness=%s", swap.URL, l.token, l.claim, url.QueryEscape(l.vkey), url.QueryEscape(wvkey)))
	if v != "true" {
		t.Fatalf("claim with the reader's keys: data-verified=%s: %s", v, txt)
	}
	if err := p.Eval(ctx, `[...document.querySelectorAll("#checkpoint tbody tr")].map(r => r.innerText)`, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !strings.Contains(rows[1], "✓ cosignature verifies") || !strings.Contains(rows[1], "a witness key you gave") {
		t.Errorf("the cosignature by the witness key the reader gave is not shown as theirs: %q", rows)
	}
}

package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// TestUIWrongKeyOnce opens the claim, whose task has three steps, with a
// verifier key that does not fit the log: the reader's own key (with a
// reader token, and on provlog view's offline page without one), and the
// key a server gives as the log's own, or none of text, when the reader
// gives none. The verdict says once what was wrong with the key and what
// to do (the header's slot for the log's key shows only that key); each
// timeline step says it could not be verified, pointing to the verdict,
// without repeating the reason. Each step repeated the whole reason.
func TestUIWrongKeyOnce(t *testing.T) {
	l := newUILog(t, false)
	_, elsewhere, err := note.GenerateKey(rand.Reader, "provlog.example/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	// A server whose log.json names as the log's key vkey (JSON): one of
	// the log's name that did not sign it, or none.
	var vkey atomic.Value
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui/log.json" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"source":"sidecar","vkey":%s,"witnesses":[]}`, vkey.Load())
			return
		}
		l.sc.handler().ServeHTTP(w, r)
	}))
	defer liar.Close()
	const (
		unsigned  = "carries no signature by the key"
		yours     = "this server is not showing that log's signed history"
		theirs    = "the log's verifier key, as you were handed it"
		otherName = "is not the key's name"
		noKey     = "is not of the form name+hash+key"
	)
	type wrongKey struct{ name, fragment, reason, todo string }
	keyed := func(k string) string { return fmt.Sprintf("entry=%d&vkey=%s", l.claim, url.QueryEscape(k)) }
	p, ctx := openPage(t)
	check := func(base string, cases []wrongKey) {
		for _, tc := range cases {
			v, txt := verdict(t, ctx, p, base+"/ui/#"+tc.fragment)
			if v != "false" || !strings.Contains(txt, tc.reason) || !strings.Contains(txt, tc.todo) {
				t.Errorf("%s: data-verified=%s, want the verdict to say %q and %q: %s", tc.name, v, tc.reason, tc.todo, txt)
			}
			var got struct {
				Body  string
				Marks []string
			}
			if err := p.Eval(ctx, `({Body: document.querySelector("main").innerText, Marks: [...document.querySelectorAll("#timeline .check")].map(e => e.dataset.verified + " " + e.innerText)})`, &got); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(got.Body, tc.reason); n != 1 {
				t.Errorf("%s: the page says %q %d times, want once: %s", tc.name, tc.reason, n, got.Body)
			}
			if len(got.Marks) != 3 {
				t.Errorf("%s: timeline marks %q, want 3", tc.name, got.Marks)
			}
			for i, m := range got.Marks {
				if !strings.HasPrefix(m, "false (✗ not verified") || !strings.Contains(m, "see the verdict above") {
					t.Errorf("%s: step %d is marked %q, want not verified, pointing to the verdict", tc.name, i+1, m)
				}
			}
		}
	}
	tok := "token=" + l.token + "&"
	check(l.base, []wrongKey{{"the reader's key of the log's name, with a token", tok + keyed(l.otherKey), unsigned, yours}})
	vkey.Store(fmt.Sprintf("%q", l.otherKey))
	check(liar.URL, []wrongKey{{"the server's key as the log's own, no reader key", tok + fmt.Sprintf("entry=%d", l.claim), unsigned, theirs}})
	vkey.Store("7")
	check(liar.URL, []wrongKey{{"no key from the server, no reader key", tok + fmt.Sprintf("entry=%d", l.claim), "the vkey in /ui/log.json is a number", "enter the verifier key"}})

	l.close()
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", l.data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	check(serveView(t, ctx, out), []wrongKey{
		{"offline, the reader's key of the log's name", keyed(l.otherKey), unsigned, yours},
		{"offline, the reader's key of another name", keyed(elsewhere), otherName, yours},
		{"offline, the reader's key no key at all", keyed("not-a-key"), noKey, yours},
	})
}

// TestUIWrongKeyAndEntry opens the claim from a server that changes the
// entries' bytes, with the reader's own key of the log's name that did
// not sign it: the verdict says the entry's failure first, then the key's
// once, with what to do; each step points to the verdict for the key.
// The verdict said only the entry's failure, and each step the key's.
func TestUIWrongKeyAndEntry(t *testing.T) {
	l := newUILog(t, false)
	hs := httptest.NewServer(tamper(l.sc.handler(), "entry"))
	defer hs.Close()
	p, ctx := openPage(t)
	const (
		entryReason = "the receipt names another leaf hash than the entry's bytes give"
		keyReason   = "carries no signature by the key"
		todo        = "this server is not showing that log's signed history"
	)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d&vkey=%s", hs.URL, l.token, l.claim, url.QueryEscape(l.otherKey)))
	e, k := strings.Index(txt, entryReason), strings.Index(txt, keyReason)
	if v != "false" || e < 0 || k < e || !strings.Contains(txt, todo) {
		t.Errorf("data-verified=%s, want the verdict to say %q, then %q, and %q: %s", v, entryReason, keyReason, todo, txt)
	}
	var got struct {
		Body  string
		Marks []string
	}
	if err := p.Eval(ctx, `({Body: document.querySelector("main").innerText, Marks: [...document.querySelectorAll("#timeline .check")].map(e => e.dataset.verified + " " + e.innerText)})`, &got); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(got.Body, keyReason); n != 1 {
		t.Errorf("the page says %q %d times, want once: %s", keyReason, n, got.Body)
	}
	if len(got.Marks) != 3 {
		t.Errorf("timeline marks %q, want 3", got.Marks)
	}
	for i, m := range got.Marks {
		if !strings.HasPrefix(m, "false (✗ not verified") || !strings.Contains(m, "see the verdict above") {
			t.Errorf("step %d is marked %q, want not verified, pointing to the verdict for the key", i+1, m)
		}
	}
	if last := got.Marks[len(got.Marks)-1]; !strings.Contains(last, entryReason) {
		t.Errorf("the claim's step is marked %q, want its own failure, %q", last, entryReason)
	}
}

// TestUISignatureLines opens the claim of a witnessed log with keys that
// fit and keys of the log's name that do not, from the sidecar and from a
// server whose log.json names another key than the log's: the checkpoint
// section lists each signature line of the note with what is known of
// it (with a wrong key of the log's name it listed none, not even the
// log's own), and a verdict against the reader's key, which verified,
// says when the server names another key as the log's.
func TestUISignatureLines(t *testing.T) {
	l := newUILog(t, true)
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ui/log.json" {
			l.sc.handler().ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		l.sc.handler().ServeHTTP(rec, r)
		var info map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		info["vkey"] = l.otherKey
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
	}))
	defer liar.Close()
	hash := func(k string) string { return strings.Split(k, "+")[1] }
	const (
		cosigned = "✓ cosignature verifies"
		redFlag  = "names another key as the log's own, which did not sign this checkpoint"
	)
	logLine := "provlog.example/agent-7\t" + hash(l.vkey) + "\t"
	cases := []struct {
		name, base, vkey, verified, logRow string
		flagged                            bool
	}{
		{"the log's key, given", l.base, l.vkey, "true", "✓ verified with the key you gave", false},
		{"no key given", l.base, "", "true", "✓ verified with the log's key as this server gives it", false},
		{"another key of the log's name, given", l.base, l.otherKey, "false", "✓ verified with the log's key as this server gives it; not the key you gave", false},
		{"another key of the log's name, as the server gives it", liar.URL, "", "false", "by a key named provlog.example/agent-7 with hash " + hash(l.vkey) + ": not the log's key as this server gives it", false},
		{"the log's key, given, the server naming another", liar.URL, l.vkey, "true", "✓ verified with the key you gave", true},
	}
	p, ctx := openPage(t)
	for _, tc := range cases {
		frag := fmt.Sprintf("token=%s&entry=%d", l.token, l.claim)
		if tc.vkey != "" {
			frag += "&vkey=" + url.QueryEscape(tc.vkey)
		}
		v, txt := verdict(t, ctx, p, tc.base+"/ui/#"+frag)
		if v != tc.verified || strings.Contains(txt, redFlag) != tc.flagged {
			t.Errorf("%s: data-verified=%s, want %s; the verdict says %q: %v, want %v: %s", tc.name, v, tc.verified, redFlag, !tc.flagged, tc.flagged, txt)
		}
		var rows []string
		if err := p.Eval(ctx, `[...document.querySelectorAll("#checkpoint tbody tr")].map(r => r.innerText)`, &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0] != logLine+tc.logRow || !strings.HasPrefix(rows[1], "witness.example/w1\t") || !strings.Contains(rows[1], cosigned) {
			t.Errorf("%s: signature rows %q, want %q and w1's %q", tc.name, rows, logLine+tc.logRow, cosigned)
		}
	}
}

// TestUIWitnessTimeOutOfRange: a witness the page knows cosigns the
// checkpoint with a time past the last date JavaScript holds (its key
// signs what it likes); the page shows the cosignature as verified, with
// its seconds, and the rest of the page. Showing the time threw, and the
// page stopped at the checkpoint.
func TestUIWitnessTimeOutOfRange(t *testing.T) {
	l := newUILog(t, false)
	skey, vkey, err := log.GenerateCosignerKey(rand.Reader, "witness.example/far")
	if err != nil {
		t.Fatal(err)
	}
	far, err := log.ParseCosignerKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		l.sc.handler().ServeHTTP(rec, r)
		body := rec.Body.String()
		switch r.URL.Path {
		case "/ui/log.json":
			var info map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			info["witnesses"] = []string{vkey}
			b, _ := json.Marshal(info)
			body = string(b)
		case "/log/proof/inclusion":
			// The receipt ends with the checkpoint's note: its text up to
			// the blank line, then its signature lines.
			cp := body[strings.Index(body, "provlog.example/agent-7\n"):]
			text := cp[:strings.Index(cp, "\n\n")+1]
			sig, err := far.SignAt([]byte(text), when)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			line := append(binary.BigEndian.AppendUint32(nil, far.KeyHash()), sig...)
			body += "— " + far.Name() + " " + base64.StdEncoding.EncodeToString(line) + "\n"
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		io.WriteString(w, body)
	}))
	defer liar.Close()
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, liar.URL+fmt.Sprintf("/ui/#token=%s&entry=%d", l.token, l.claim))
	if v != "true" {
		t.Errorf("data-verified=%s, want true: %s", v, txt)
	}
	var rows []string
	if err := p.Eval(ctx, `[...document.querySelectorAll("#checkpoint tbody tr")].map(r => r.innerText)`, &rows); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("✓ cosignature verifies with a witness key this server names (signed %d s after 1970, past any date this page can show)", when.Unix())
	if len(rows) != 2 || !strings.HasPrefix(rows[1], "witness.example/far\t") || !strings.HasSuffix(rows[1], want) {
		t.Errorf("signature rows %q, want far's %q", rows, want)
	}
}

// Package ui serves the auditor's view: a static page under /ui/ that looks
// up one log entry (by index, leaf hash or task id), shows it, its task's
// history, its checkpoint's signatures and cosignatures and its anchors, and
// verifies the entry's inclusion proof and the checkpoint's signature in the
// browser with WebCrypto, against a verifier key it shows.
//
// # What the page reads
//
// The page is plain HTML, JavaScript and CSS embedded in the binary: no
// framework, no build step, nothing fetched from elsewhere. It reads only
// same-origin paths:
//
//   - /ui/log.json: [Info], the log's verifier key and its witnesses' keys;
//   - /log/proof/inclusion?index=N|hash=HEX: the entry's receipt
//     (c2sp.org/tlog-proof@v1), whose checkpoint it verifies;
//   - /log/entry/N: the entry's exact bytes, whose leaf hash it computes;
//   - /log/anchors: the anchor summaries (TSA time, Rekor index), page
//     after page (?after=the last anchor's name), at most 50 pages; a
//     page of the wrong shape is shown as such and paging goes on past it
//     while a next page can be named, else the page says why it stopped;
//   - /log/task/<id>: a task and its history (see [TaskHandler]).
//
// The sidecar serves these from its log; `provlog view` serves the same
// paths from an export bundle or an evidence directory, offline.
//
// Every string the page shows came from an agent, a client, a downstream
// server or a bundle's author: it is shown as text, never as markup or a
// link, and an invisible or direction-changing character in it (U+202E,
// U+200B...) as a mark naming its code point; in a word that mixes
// scripts whose letters look alike (Latin, Greek, Cyrillic...), each
// letter not of the word's main script is followed by a mark naming its
// script and code point ("аdmin" with a Cyrillic "а"); a word wholly of
// letters that look Latin but are not ("раура" in Cyrillic, full-width
// "ａｄｍｉｎ") is followed by a mark naming its script and the word it
// passes for; a Latin letter Unicode takes for an ASCII one ("ɑdmin") is
// marked, save ı and þ in a text of Turkish or Icelandic words (one that
// holds their other letters: ç, ş, ð, é...) outside an identifier. So no
// id can pass for another. The arrays and objects the page reads (an entry, a task's
// history, the anchors) show nested up to 100 deep, the most the log
// accepts in an entry; deeper ones (a hostile server's or bundle's) show
// as a marked summary, an entry's whole only in its exact bytes. An answer,
// or a part of one, of a shape the page does not read (witnesses that are
// null, anchors that are no list) shows in its part of the page as what
// was wrong: which answer, and what it should have been; the rest of the
// page is shown without it.
// The Content-Security-Policy allows no inline script.
//
// # Opening one entry
//
// The fragment #token=T&entry=N[&vkey=VKEY] opens entry N with the reader
// token T (sent as Authorization: Bearer T; a fragment never reaches the
// server's logs). A given VKEY replaces the log's own key for the check,
// so an auditor checks against the key they were handed, not the one the
// server offers. A key that does not fit the checkpoint (of another name,
// or one that did not sign it) is said once, in the verdict, with what to
// do, after the entry's own failure if it has one (changed bytes, a proof
// that does not fit); the task's steps, which fail for the same reason,
// point to it. When the reader's key verifies but /ui/log.json names
// another as the log's, the verdict says so. The checkpoint section lists
// every signature line of the note with what is known of it: verified
// with the key checked against or the one the server gives, of a known
// name but not that key, a witness's cosignature verified or not, or of
// a key the page does not know. #hash=HEX and #task=ID open an entry by
// leaf hash and a task's latest entry. The element with id "verdict" carries
// data-verified="true" once the signature and the proof hold, "false"
// when either fails or cannot be checked, and no such attribute while the
// check runs.
//
// # A task's history
//
// Each step of the server's history is verified as an entry of the task,
// in log order (each index past the one listed before it) and proved in
// the verdict's checkpoint or one linked to it by a consistency proof;
// a verified step shows its entry's own words, what an agent wrote
// (titles, summaries, notes) quoted apart as the agent's. Beside a claim
// the page flags each call it cites that has no recorded outcome: no
// verified call.result of the call's actor names it among the entries
// after it that the page reads (at most 512).
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Info is /ui/log.json: what the page shows and verifies against unless the
// reader gives a key of their own.
type Info struct {
	// VKey is the log's note verifier key (c2sp.org/signed-note).
	VKey string `json:"vkey"`
	// Witnesses are the cosignature verifier keys of the log's witnesses
	// (c2sp.org/tlog-cosignature), if any are known.
	Witnesses []string `json:"witnesses"`
	// Source says where the data comes from: "sidecar", "bundle" or
	// "evidence".
	Source string `json:"source"`
	// Missing says in words what the data lacks (an evidence directory's
	// own list: no anchor yet, a checkpoint not cosigned); the page shows
	// it.
	Missing []string `json:"missing,omitempty"`
}

// contentSecurity keeps the page to its own files: no inline script, no
// other origin, no framing.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page under /ui/ (it expects full request paths):
// /ui/ is the page, /ui/log.json is info, the other files are the page's
// script and style. Everything it serves is public.
func Handler(info Info) http.Handler {
	if info.Witnesses == nil {
		info.Witnesses = []string{}
	}
	infoJSON, err := json.Marshal(info)
	if err != nil {
		panic("ui: encoding Info: " + err.Error()) // strings only: cannot fail
	}
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic("ui: " + err.Error())
	}
	fileServer := http.StripPrefix("/ui/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurity)
		// For browsers that know no frame-ancestors.
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the auditor's view is read-only (GET, HEAD)", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/ui":
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		case "/ui/log.json":
			h.Set("Content-Type", "application/json")
			w.Write(infoJSON)
		default:
			fileServer.ServeHTTP(w, r)
		}
	})
}

// ErrNoTask is what a [TaskLookup] returns (wrapped or not) for a task id
// the log does not hold.
var ErrNoTask = errors.New("no such task")

// A TaskLookup returns a task and its history as a value that encodes to
// the JSON the page reads (provlog's opp.Task: task_id, title, state,
// owner, history: [{index, leaf_hash, kind, actor, time, ...}]).
type TaskLookup func(ctx context.Context, id string) (any, error)

// TaskHandler serves GET /log/task/<id>: the task's current state and its
// history as JSON, from lookup. The log package knows no tasks, so the
// caller that does passes the lookup in. authorized, if not nil, must
// approve each request (else 401 with "WWW-Authenticate: Bearer"), as for
// the log's entries: a task's history reveals them.
func TaskHandler(lookup TaskLookup, authorized func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		if authorized != nil && !authorized(r) {
			h.Set("WWW-Authenticate", "Bearer")
			http.Error(w, "task histories need a reader token: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		id, ok := strings.CutPrefix(r.URL.Path, "/log/task/")
		if !ok || id == "" || strings.Contains(id, "/") || r.URL.RawQuery != "" {
			http.Error(w, "want /log/task/<task id>", http.StatusNotFound)
			return
		}
		t, err := lookup(r.Context(), id)
		if errors.Is(err, ErrNoTask) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "looking up the task failed", http.StatusInternalServerError)
			return
		}
		body, err := json.Marshal(t)
		if err != nil {
			http.Error(w, "encoding the task failed", http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "application/json")
		w.Write(body)
	})
}

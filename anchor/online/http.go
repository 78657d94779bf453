package online

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
)

// Summary is one record in the /log/anchors listing: what it anchors,
// who vouched for it, the sidecar that keeps it (its anchor entry's
// sidecar) and how to fetch it.
type Summary struct {
	Name string `json:"name"`
	URL  string `json:"url"` // /log/anchors/<name>: the record's exact bytes
	*log.AnchorEntry
}

// MaxListing is the most records one /log/anchors page lists.
const MaxListing = 1000

// NewHandler serves the anchor records of s under /log/anchors (it
// expects full request paths):
//
//   - GET /log/anchors[?after=NAME][&limit=N]: a JSON array of [Summary],
//     oldest first, at most limit (default and maximum [MaxListing]) after
//     the record named after;
//   - GET /log/anchors/<name>: the record's stored bytes, which verify
//     offline (`provlog audit`).
//
// authorized, if not nil, must approve each request (else 401 with
// "WWW-Authenticate: Bearer"), as for the log's entry contents.
func NewHandler(s *anchor.Store, authorized func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		if authorized != nil && !authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "the anchors need a reader token: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		name, found := strings.CutPrefix(r.URL.Path, "/log/anchors/")
		switch {
		case found:
			serveRecord(w, s, name)
		case r.URL.Path == "/log/anchors":
			serveList(w, r, s)
		default:
			http.NotFound(w, r)
		}
	})
}

func serveRecord(w http.ResponseWriter, s *anchor.Store, name string) {
	st, err := s.Get(name)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no anchor record "+strconv.Quote(name), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "reading the anchor record failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "private, max-age=31536000, immutable")
	w.Write(st.Bytes)
}

func serveList(w http.ResponseWriter, r *http.Request, s *anchor.Store) {
	q := r.URL.Query()
	for k := range q {
		if k != "after" && k != "limit" {
			http.Error(w, "unknown query parameter "+strconv.Quote(k)+"; use after and limit", http.StatusBadRequest)
			return
		}
	}
	limit := MaxListing
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxListing {
			http.Error(w, "limit must be a number from 1 to "+strconv.Itoa(MaxListing), http.StatusBadRequest)
			return
		}
		limit = n
	}
	names, err := s.Names()
	if err != nil {
		http.Error(w, "listing anchor records failed", http.StatusInternalServerError)
		return
	}
	if after := q.Get("after"); after != "" {
		i := 0
		for i < len(names) && names[i] != after {
			i++
		}
		if i == len(names) {
			http.Error(w, "no anchor record "+strconv.Quote(after), http.StatusNotFound)
			return
		}
		names = names[i+1:]
	}
	sidecar, err := anchor.ReadSidecar(s.Dir())
	if err != nil {
		http.Error(w, "reading the sidecar id failed", http.StatusInternalServerError)
		return
	}
	out := []Summary{}
	for _, n := range names {
		if len(out) == limit {
			break
		}
		st, err := s.Get(n)
		if err != nil {
			http.Error(w, "reading anchor records failed", http.StatusInternalServerError)
			return
		}
		if st.Err != nil {
			continue
		}
		f := anchor.Fields(st)
		f.Sidecar = sidecar // the records here are this data dir's sidecar's
		out = append(out, Summary{Name: n, URL: "/log/anchors/" + n, AnchorEntry: f})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

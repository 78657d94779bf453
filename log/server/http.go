package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/cose"
)

// APIOptions configure the HTTP log API.
type APIOptions struct {
	Store log.Storage
	Seq   *Sequencer // source of the latest checkpoint (Seq.Checkpoint())
	// Authorized reports whether r may read entry contents (entry bundles,
	// entries, proofs, anchors). nil means they are public.
	Authorized func(r *http.Request) bool
	// Cosigned, if set, returns the newest checkpoint that carries enough
	// witness cosignatures (nil while there is none). /log/checkpoint
	// serves it instead of the latest (unless it is older than one
	// /log/checkpoint served: then that one again), and inclusion proofs
	// without an explicit size lead to it when it covers the entry.
	Cosigned func() []byte
	// ServedBefore is the newest checkpoint /log/checkpoint served before
	// this process started (nil if none), and Served, if set, keeps each
	// newer one beyond the process before it is served (an error fails
	// the request). With them a restarted sidecar serves no checkpoint
	// older than one served before the restart, where the witnesses'
	// newest cosigned checkpoint may be older. NewAPI panics if
	// ServedBefore is not nil and not a checkpoint.
	ServedBefore []byte
	Served       func(cp []byte) error
	// Signer, the log's Ed25519 note signer, signs the RFC 9942 COSE
	// receipts of /log/proof/inclusion?...&format=cose (nil: refused).
	Signer note.Signer
}

// NewAPI returns a handler serving the log API under /log/ (it expects full
// request paths such as /log/checkpoint). It serves GET and HEAD:
//
//   - /log/checkpoint: the latest signed checkpoint
//     (c2sp.org/tlog-checkpoint), public;
//   - /log/tile/<L>/<N>[.p/<W>]: hash tiles according to
//     c2sp.org/tlog-tiles, public;
//   - /log/tile/entries/<N>[.p/<W>]: entry bundles according to
//     c2sp.org/tlog-tiles;
//   - /log/entry/<N>: the exact bytes of entry N;
//   - /log/proof/inclusion?index=N|hash=HEX[&size=S][&format=cose]: a
//     receipt (c2sp.org/tlog-proof@v1) for an entry, by index or by leaf
//     hash, in the tree of the latest checkpoint or of the checkpoint signed
//     at size S; with format=cose, the same proof as an RFC 9942 COSE
//     receipt (application/cose, see package log/cose);
//   - /log/proof/consistency?old=A[&new=B]: the RFC 6962 consistency proof
//     between two tree sizes, one base64 hash per line.
//
// On a shared log, /log/checkpoint (when it serves the latest, not a
// cosigned checkpoint) first asks the store for the newest state
// (Sequencer.CatchUp), so that it is never older than a receipt another
// sidecar handed out before the request.
//
// Tiles are served for the tree of the latest checkpoint; a partial tile of
// width W is served as long as the tile holds at least W hashes, so clients
// holding an older checkpoint can still read it. On a shared log, a tile,
// entry or proof past the latest checkpoint here is looked for in the
// store's newest state first (Sequencer.CatchUp), so a client holding
// another sidecar's checkpoint can read its tree here. Everything but the
// checkpoint and hash tiles reveals entries and needs opts.Authorized.
//
// The checkpoint, tiles, bundles and entries carry a strong ETag, and
// If-None-Match naming it is answered 304; Range is ignored (etag.go).
//
// Errors are plain text saying what was wrong: 400 for a malformed request
// (bad number, path or hex, unknown or repeated query parameter), 401 with
// "WWW-Authenticate: Bearer" without authorization, 404 for what is not in
// the log at its current size, 405 for methods other than GET and HEAD, 413
// for a request with a body. Nothing is ever written.
//
// NewAPI panics if opts.Store or opts.Seq is nil.
func NewAPI(opts APIOptions) http.Handler {
	if opts.Store == nil || opts.Seq == nil {
		panic("server.NewAPI: Store and Seq are required")
	}
	a := &api{opts: opts}
	if opts.ServedBefore != nil {
		c, err := log.ParseCheckpointNote(opts.ServedBefore)
		if err != nil {
			panic("server.NewAPI: ServedBefore: " + err.Error())
		}
		a.served, a.size = opts.ServedBefore, c.Size
	}
	return a
}

type api struct {
	opts APIOptions

	mu     sync.Mutex
	served []byte // the newest checkpoint /log/checkpoint served (or ServedBefore)
	size   uint64 // its size
}

// A response is a successful answer.
type response struct {
	contentType string
	cache       string
	body        []byte
	// stream, if not nil, writes the body in parts instead, its length
	// not known beforehand, once prepare (if not nil) returned without an
	// error. An error stream returns once the answer began aborts the
	// connection, so that no client takes a cut body for a whole one.
	prepare func() error
	stream  func(w io.Writer) error
	// etag, if not empty, is the answer's strong entity tag (etag.go).
	etag string
}

// apiError is a request the API refuses: the status to answer with and a
// message for the client saying what was wrong.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// writeError is the one place errors become HTTP statuses.
func writeError(w http.ResponseWriter, err error) {
	status, msg := http.StatusInternalServerError, "internal error"
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		status, msg = ae.status, ae.msg
	case errors.Is(err, log.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status, msg = http.StatusServiceUnavailable, "request canceled"
	case log.FaultReason(err) != "":
		// Say that the store broke, and how: an operator reading the
		// answer to a proof must not have to guess at "internal error".
		msg = "the log store failed (" + log.FaultReason(err) + "): " + err.Error()
	}
	h := w.Header()
	switch status {
	case http.StatusMethodNotAllowed:
		h.Set("Allow", "GET, HEAD")
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", "Bearer")
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// endpoint is one resource of the API. Protected endpoints reveal entries.
type endpoint struct {
	protected bool
	serve     func(a *api, ctx context.Context, arg string, q url.Values) (*response, error)
}

var (
	checkpointEndpoint  = &endpoint{serve: (*api).checkpoint}
	hashTileEndpoint    = &endpoint{serve: (*api).hashTile}
	entryBundleEndpoint = &endpoint{protected: true, serve: (*api).entryBundle}
	entryEndpoint       = &endpoint{protected: true, serve: (*api).entry}
	inclusionEndpoint   = &endpoint{protected: true, serve: (*api).inclusion}
	consistencyEndpoint = &endpoint{protected: true, serve: (*api).consistency}
)

// route finds the endpoint for a path below /log/ and the part of the path
// it interprets.
func route(path string) (*endpoint, string) {
	switch {
	case path == "checkpoint":
		return checkpointEndpoint, ""
	case strings.HasPrefix(path, "tile/entries/"):
		return entryBundleEndpoint, path
	case strings.HasPrefix(path, "tile/"):
		return hashTileEndpoint, path
	case strings.HasPrefix(path, "entry/"):
		return entryEndpoint, strings.TrimPrefix(path, "entry/")
	case path == "proof/inclusion":
		return inclusionEndpoint, ""
	case path == "proof/consistency":
		return consistencyEndpoint, ""
	}
	return nil, ""
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := a.handle(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	if resp.etag != "" {
		h.Set("ETag", resp.etag)
		if noneMatch(r.Header.Values("If-None-Match"), resp.etag) {
			h.Set("Cache-Control", resp.cache)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if resp.prepare != nil {
		if err := resp.prepare(); err != nil {
			h.Del("ETag")
			writeError(w, err)
			return
		}
	}
	h.Set("Content-Type", resp.contentType)
	switch {
	case resp.stream == nil:
		h.Set("Content-Length", strconv.Itoa(len(resp.body)))
	case r.Method == http.MethodHead:
		// The length a GET would send: the parts are read and counted,
		// not held.
		var n countWriter
		if err := resp.stream(&n); err != nil {
			h.Del("ETag")
			writeError(w, err)
			return
		}
		h.Set("Content-Length", strconv.FormatInt(int64(n), 10))
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", resp.cache)
	w.WriteHeader(http.StatusOK)
	switch {
	case r.Method == http.MethodHead:
	case resp.stream != nil:
		if err := resp.stream(w); err != nil {
			panic(http.ErrAbortHandler)
		}
	default:
		w.Write(resp.body)
	}
}

// A countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

func (a *api) handle(w http.ResponseWriter, r *http.Request) (*response, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/log/")
	if !ok {
		return nil, errorf(http.StatusNotFound, "%s is not part of the log API, which is under /log/", r.URL.Path)
	}
	ep, arg := route(rest)
	if ep == nil {
		return nil, errorf(http.StatusNotFound, "no such log resource %q", r.URL.Path)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, errorf(http.StatusMethodNotAllowed, "method %s not allowed: the log API is read-only (GET, HEAD)", r.Method)
	}
	if err := refuseBody(w, r); err != nil {
		return nil, err
	}
	if ep.protected && a.opts.Authorized != nil && !a.opts.Authorized(r) {
		return nil, errorf(http.StatusUnauthorized, "%s needs a reader token: send Authorization: Bearer <token>", r.URL.Path)
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "malformed query string: %v", err)
	}
	return ep.serve(a, r.Context(), arg, q)
}

// refuseBody fails unless the request has no body: the API only reads.
func refuseBody(w http.ResponseWriter, r *http.Request) error {
	tooLarge := errorf(http.StatusRequestEntityTooLarge, "%s requests take no body", r.Method)
	if r.ContentLength > 0 {
		return tooLarge
	}
	if r.ContentLength < 0 && r.Body != nil {
		// Length unknown (chunked): read at most one byte to find out.
		_, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 0))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge
		}
		if err != nil {
			return errorf(http.StatusBadRequest, "reading request body: %v", err)
		}
	}
	return nil
}

// noQuery refuses query parameters on endpoints that take none.
func noQuery(q url.Values) error {
	for k := range q {
		return errorf(http.StatusBadRequest, "unknown query parameter %q", k)
	}
	return nil
}

// cacheControl says how long a response may be cached: immutable ones for a
// year, others must be revalidated. Protected responses are never kept in
// shared caches.
func (a *api) cacheControl(protected, immutable bool) string {
	scope := "public"
	if protected && a.opts.Authorized != nil {
		scope = "private"
	}
	if immutable {
		return scope + ", max-age=31536000, immutable"
	}
	return scope + ", max-age=60"
}

// cosigned returns the newest cosigned checkpoint and its size, if there is
// one and it is the log's own checkpoint at its size with cosignatures
// added: a cosigned note whose root differs from the log's at that size
// (a log that lost entries and grew again) is never served.
func (a *api) cosigned(ctx context.Context) (uint64, []byte) {
	if a.opts.Cosigned == nil {
		return 0, nil
	}
	c := a.opts.Cosigned()
	if c == nil {
		return 0, nil
	}
	ck, err := log.ParseCheckpointNote(c)
	if err != nil {
		return 0, nil
	}
	own, err := a.opts.Store.Checkpoint(ctx, ck.Size)
	if err != nil || !bytes.HasPrefix(c, own) {
		return 0, nil
	}
	return ck.Size, c
}

func (a *api) checkpoint(ctx context.Context, _ string, q url.Values) (*response, error) {
	if err := noQuery(q); err != nil {
		return nil, err
	}
	size, cp := a.opts.Seq.Checkpoint()
	if s, c := a.cosigned(ctx); c != nil {
		size, cp = s, c
	} else if a.opts.Seq.Shared() && size < math.MaxUint64 {
		// Another sidecar may have handed out a receipt on a newer
		// checkpoint than this one heard of: ask the store (one query,
		// shared by the reads that wait for it), so that a client
		// reading it next is not rolled back.
		size, cp = a.opts.Seq.CatchUp(ctx, size+1)
	}
	if cp == nil {
		return nil, errorf(http.StatusNotFound, "the log has no checkpoint yet")
	}
	// Never roll a client back: a cosigned checkpoint older than the
	// latest served before it (before any witness cosigned, while the
	// store could not be read, or before a restart) waits until the
	// witnesses catch up; one at least as new is served, cosignatures
	// and all.
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case size < a.size:
		cp = a.served
	case size > a.size && a.opts.Served != nil:
		if err := a.opts.Served(cp); err != nil {
			return nil, fmt.Errorf("recording the checkpoint of size %d before serving it: %w", size, err)
		}
		fallthrough
	default:
		a.served, a.size = cp, size
	}
	return &response{contentType: "text/plain; charset=utf-8", cache: "no-cache", body: cp, etag: etagOf('c', cp)}, nil
}

// tile parses a tile path and checks that the tile holds at least the
// requested width in the tree of the latest checkpoint.
func (a *api) tile(ctx context.Context, path string, q url.Values) (log.Tile, error) {
	if err := noQuery(q); err != nil {
		return log.Tile{}, err
	}
	t, err := log.ParseTilePath(path)
	if err != nil {
		return log.Tile{}, errorf(http.StatusBadRequest, "%v (want tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>] according to c2sp.org/tlog-tiles)", err)
	}
	size, _ := a.opts.Seq.Checkpoint()
	if need, ok := sizeFor(t); ok && log.TileWidthAt(t.Level, t.N, size) < t.W {
		size, _ = a.opts.Seq.CatchUp(ctx, need)
	}
	if w := log.TileWidthAt(t.Level, t.N, size); w < t.W {
		if w == 0 {
			return log.Tile{}, errorf(http.StatusNotFound, "%s does not exist in the tree of size %d", path, size)
		}
		return log.Tile{}, errorf(http.StatusNotFound, "%s does not exist in the tree of size %d, which has %d entries in this tile", path, size, w)
	}
	return t, nil
}

// sizeFor returns the smallest tree size that holds tile t at its width,
// and false if no tree of up to 2^64-1 entries does.
func sizeFor(t log.Tile) (uint64, bool) {
	end := uint64(t.W)
	if t.N > (math.MaxUint64-end)/log.TileWidth {
		return 0, false
	}
	end += t.N * log.TileWidth
	shift := uint(log.TileHeight * max(t.Level, 0))
	if shift >= 64 || end > math.MaxUint64>>shift {
		return 0, false
	}
	return end << shift, true
}

func (a *api) tileCache(t log.Tile, protected bool) string {
	// A partial tile's content is fixed too, but clients should move on to
	// the wider tile as the log grows.
	return a.cacheControl(protected, t.W == log.TileWidth)
}

func (a *api) hashTile(ctx context.Context, path string, q url.Values) (*response, error) {
	t, err := a.tile(ctx, path, q)
	if err != nil {
		return nil, err
	}
	hashes, err := a.opts.Store.ReadNodes(ctx, t.NodeIDs())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	body := make([]byte, 0, len(hashes)*log.HashSize)
	for _, h := range hashes {
		body = append(body, h...)
	}
	return &response{contentType: "application/octet-stream", cache: a.tileCache(t, false), body: body, etag: etagOf('t', body)}, nil
}

func (a *api) entry(ctx context.Context, arg string, q url.Values) (*response, error) {
	if err := noQuery(q); err != nil {
		return nil, err
	}
	i, err := parseUint("entry index", arg)
	if err != nil {
		return nil, err
	}
	size, _ := a.opts.Seq.Checkpoint()
	if i >= size && i < math.MaxUint64 {
		size, _ = a.opts.Seq.CatchUp(ctx, i+1)
	}
	if i >= size {
		return nil, errorf(http.StatusNotFound, "no entry %d: the log has %d entries", i, size)
	}
	e, err := a.opts.Store.Entries(ctx, i, i+1)
	if err != nil {
		return nil, fmt.Errorf("reading entry %d: %w", i, err)
	}
	return &response{contentType: "application/json", cache: a.cacheControl(true, true), body: e[0], etag: etagOf('e', e[0])}, nil
}

// inclusionQuery is a parsed /log/proof/inclusion query: the entry by index
// or by leaf hash, and the tree size, if given.
type inclusionQuery struct {
	index    uint64
	leafHash []byte // nil when the entry is named by index
	size     uint64
	hasSize  bool
	cose     bool // format=cose
}

// parseInclusionQuery parses index=N or hash=<64 hex digits>, and an
// optional size=S.
func parseInclusionQuery(q url.Values) (inclusionQuery, error) {
	var iq inclusionQuery
	if err := onlyParams(q, "index", "hash", "size", "format"); err != nil {
		return iq, err
	}
	if f, ok := q["format"]; ok {
		if f[0] != "cose" && f[0] != "tlog-proof" {
			return iq, errorf(http.StatusBadRequest, "format %q: give format=cose (RFC 9942) or leave it out for tlog-proof", f[0])
		}
		iq.cose = f[0] == "cose"
	}
	idx, hasIndex := q["index"]
	h, hasHash := q["hash"]
	switch {
	case hasIndex && hasHash:
		return iq, errorf(http.StatusBadRequest, "give index or hash, not both")
	case hasIndex:
		i, err := parseUint("index", idx[0])
		if err != nil {
			return iq, err
		}
		iq.index = i
	case hasHash:
		if len(h[0]) != 2*log.HashSize {
			return iq, errorf(http.StatusBadRequest, "hash must be the entry's leaf hash as %d hex digits", 2*log.HashSize)
		}
		b, err := hex.DecodeString(h[0])
		if err != nil {
			return iq, errorf(http.StatusBadRequest, "hash %q is not hex", h[0])
		}
		iq.leafHash = b
	default:
		return iq, errorf(http.StatusBadRequest, "give index=N or hash=<leaf hash in hex>")
	}
	if s, ok := q["size"]; ok {
		size, err := parseUint("size", s[0])
		if err != nil {
			return iq, err
		}
		iq.size, iq.hasSize = size, true
	}
	return iq, nil
}

// ParseInclusionQuery parses a /log/proof/inclusion query as the log API
// does (index=N or hash=<leaf hash in hex>, an optional size=S and
// format), so that another server of the API (provlog view) reads its
// queries by the same rules. cose says format=cose; an error says what is
// wrong with the query.
func ParseInclusionQuery(q url.Values) (req InclusionRequest, cose bool, err error) {
	iq, err := parseInclusionQuery(q)
	return InclusionRequest{Index: iq.index, LeafHash: iq.leafHash, AtSize: iq.hasSize, Size: iq.size}, iq.cose, err
}

// ParseConsistencyQuery parses a /log/proof/consistency query (old=A and
// an optional new=B, A <= B) as [ParseInclusionQuery] does an inclusion
// query.
func ParseConsistencyQuery(q url.Values) (old, new uint64, hasNew bool, err error) {
	cq, err := parseConsistencyQuery(q)
	return cq.old, cq.new, cq.hasNew, err
}

// consistencyQuery is a parsed /log/proof/consistency query.
type consistencyQuery struct {
	old, new uint64
	hasNew   bool
}

// parseConsistencyQuery parses old=A and an optional new=B, with A <= B.
func parseConsistencyQuery(q url.Values) (consistencyQuery, error) {
	var cq consistencyQuery
	if err := onlyParams(q, "old", "new"); err != nil {
		return cq, err
	}
	o, ok := q["old"]
	if !ok {
		return cq, errorf(http.StatusBadRequest, "give old=A (and optionally new=B)")
	}
	var err error
	if cq.old, err = parseUint("old", o[0]); err != nil {
		return cq, err
	}
	if n, ok := q["new"]; ok {
		if cq.new, err = parseUint("new", n[0]); err != nil {
			return cq, err
		}
		cq.hasNew = true
		if cq.old > cq.new {
			return cq, errorf(http.StatusBadRequest, "old size %d is above new size %d", cq.old, cq.new)
		}
	}
	return cq, nil
}

// onlyParams refuses parameters not in names and repeated parameters.
func onlyParams(q url.Values, names ...string) error {
	for k, v := range q {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return errorf(http.StatusBadRequest, "unknown query parameter %q (want %s)", k, strings.Join(names, ", "))
		}
		if len(v) != 1 {
			return errorf(http.StatusBadRequest, "query parameter %q given %d times", k, len(v))
		}
	}
	return nil
}

// parseUint parses a decimal number without sign or leading zeros.
func parseUint(what, s string) (uint64, error) {
	bad := errorf(http.StatusBadRequest, "%s %q is not a decimal number without leading zeros", what, s)
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return 0, bad
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "%s %q is out of range", what, s)
	}
	return n, nil
}

func (a *api) inclusion(ctx context.Context, _ string, q url.Values) (*response, error) {
	iq, err := parseInclusionQuery(q)
	if err != nil {
		return nil, err
	}
	req := InclusionRequest{Index: iq.index, LeafHash: iq.leafHash, AtSize: iq.hasSize, Size: iq.size}
	if !iq.hasSize && a.opts.Cosigned != nil {
		req.Cosigned = a.opts.Cosigned()
	}
	rc, err := a.opts.Seq.Prove(ctx, a.opts.Store, req)
	if errors.Is(err, log.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, "%s", err)
	}
	if err != nil {
		return nil, err
	}
	if !iq.cose {
		return &response{contentType: "text/plain; charset=utf-8", cache: a.cacheControl(true, false), body: []byte(rc.String())}, nil
	}
	if a.opts.Signer == nil {
		return nil, errorf(http.StatusNotFound, "this server makes no COSE receipts; leave format out for a tlog-proof receipt")
	}
	b, err := cose.SignReceipt(a.opts.Signer, rc)
	if err != nil {
		return nil, err
	}
	return &response{contentType: `application/cose; cose-type="cose-sign1"`, cache: a.cacheControl(true, false), body: b}, nil
}

func (a *api) consistency(ctx context.Context, _ string, q url.Values) (*response, error) {
	cq, err := parseConsistencyQuery(q)
	if err != nil {
		return nil, err
	}
	size, _ := a.opts.Seq.Checkpoint()
	if cq.hasNew {
		size, _ = a.opts.Seq.CatchUp(ctx, cq.new)
	}
	if !cq.hasNew {
		cq.new = size
		if cq.old > cq.new {
			return nil, errorf(http.StatusNotFound, "old size %d is above the log's size %d", cq.old, size)
		}
	}
	if cq.new > size {
		return nil, errorf(http.StatusNotFound, "new size %d is above the log's size %d", cq.new, size)
	}
	p, err := log.ProveConsistency(ctx, a.opts.Store, cq.old, cq.new)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, h := range p {
		b.WriteString(base64.StdEncoding.EncodeToString(h))
		b.WriteByte('\n')
	}
	return &response{contentType: "text/plain; charset=utf-8", cache: a.cacheControl(true, cq.hasNew), body: []byte(b.String())}, nil
}

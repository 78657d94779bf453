// Package client reads a provlog log over HTTP: the checkpoint, hash
// tiles and entry bundles of c2sp.org/tlog-tiles, and the receipts and
// other documents of provlog's log API under the same prefix. provlog's
// commands that take --log URL and the witness's pull mode share it.
package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/provlog/provlog/log"
)

// MaxResponse bounds a response body when the caller gives no limit.
const MaxResponse = 64 << 20

// A StatusError is an answer other than 200 (and 404, which is
// [log.ErrNotFound]): the status and the start of what the server said.
type StatusError struct {
	Method string // "" is GET
	URL    string // without its credentials (log.RedactURL)
	Code   int
	Msg    string
}

func (e *StatusError) Error() string {
	m := e.Method
	if m == "" {
		m = http.MethodGet
	}
	s := fmt.Sprintf("%s %s: %d %s", m, e.URL, e.Code, http.StatusText(e.Code))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// A Client reads one log. It is safe for concurrent use.
type Client struct {
	prefix string
	token  string
	hc     *http.Client
}

// New returns a client for the log whose tlog-tiles prefix is prefix (a
// provlog sidecar's is <base>/log/). token, if not empty, is sent as a
// bearer token (a reader token, for entries and proofs); hc nil means
// http.DefaultClient.
func New(prefix, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	if p, err := log.JoinURL(prefix, ""); err == nil {
		prefix = p // a prefix that does not parse fails each request
	}
	return &Client{prefix: prefix, token: token, hc: hc}
}

// Prefix returns the log's prefix, its path ending in a slash (a query,
// such as an API key, comes after it and goes with every request).
func (c *Client) Prefix() string { return c.prefix }

// Get fetches path (relative to the prefix, with a query of its own or not) and returns its body, at most
// limit bytes (0: [MaxResponse]). A 404 wraps [log.ErrNotFound]; another
// status other than 200 is a [*StatusError].
func (c *Client) Get(ctx context.Context, path string, limit int64) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, nil, limit)
}

// Post sends body as JSON to path (relative to the prefix), as provlog's
// log API takes its few requests that write (purge), and returns the
// answer's body as [Client.Get] does.
func (c *Client) Post(ctx context.Context, path string, body []byte) ([]byte, error) {
	return c.do(ctx, http.MethodPost, path, body, 0)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxResponse
	}
	u, err := log.JoinURL(c.prefix, path)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, log.RedactURLError(err)
	}
	defer resp.Body.Close()
	// Errors name the URL without its credentials (an API key in the
	// query): they reach a terminal and the sidecar's log.
	shown := log.RedactURL(u)
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, shown, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s %s: %s: %w", method, shown, firstLine(b), log.ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Method: method, URL: shown, Code: resp.StatusCode, Msg: firstLine(b)}
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: response over %d bytes", method, shown, limit)
	}
	return b, nil
}

// firstLine is the start of an error body, for a message.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Checkpoint fetches the log's latest signed checkpoint note.
func (c *Client) Checkpoint(ctx context.Context) ([]byte, error) {
	return c.Get(ctx, "checkpoint", 1<<20)
}

// Tile fetches a hash tile or an entry bundle.
func (c *Client) Tile(ctx context.Context, t log.Tile) ([]byte, error) {
	limit := int64(log.TileWidth * log.HashSize)
	if t.Level == log.EntriesLevel {
		limit = MaxResponse
	}
	return c.Get(ctx, t.Path(), limit)
}

// Entries reads entries [start, end) from the entry bundles.
func (c *Client) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	var out [][]byte
	for i := start; i < end; {
		n := i / log.TileWidth
		w := log.TileWidth
		if last := (n + 1) * log.TileWidth; last > end {
			w = int(end - n*log.TileWidth)
		}
		t := log.Tile{Level: log.EntriesLevel, N: n, W: w}
		b, err := c.Tile(ctx, t)
		if err != nil {
			return nil, err
		}
		es, err := log.ParseEntryBundle(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Path(), err)
		}
		if len(es) != w {
			return nil, fmt.Errorf("%s: %d entries, want %d", t.Path(), len(es), w)
		}
		out = append(out, es[i-n*log.TileWidth:]...)
		i = n*log.TileWidth + uint64(w)
	}
	return out, nil
}

// A ReceiptQuery names the entry and the tree of a receipt asked of
// provlog's log API (proof/inclusion).
type ReceiptQuery struct {
	// Index is the entry's index, unless LeafHash is set: then the entry
	// is the one with that leaf hash.
	Index    uint64
	LeafHash []byte
	// Size is the tree to prove in, 0 for the log's latest checkpoint
	// (the cosigned one, when it covers the entry).
	Size uint64
	// COSE asks for an RFC 9942 COSE receipt instead of a
	// c2sp.org/tlog-proof one.
	COSE bool
}

// Receipt fetches the receipt q asks for, as the server sent it.
func (c *Client) Receipt(ctx context.Context, q ReceiptQuery) ([]byte, error) {
	v := url.Values{}
	if q.LeafHash != nil {
		v.Set("hash", hex.EncodeToString(q.LeafHash))
	} else {
		v.Set("index", strconv.FormatUint(q.Index, 10))
	}
	if q.Size > 0 {
		v.Set("size", strconv.FormatUint(q.Size, 10))
	}
	if q.COSE {
		v.Set("format", "cose")
	}
	return c.Get(ctx, "proof/inclusion?"+v.Encode(), 0)
}

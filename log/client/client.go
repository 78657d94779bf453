// Package client reads a provlog log over HTTP: the checkpoint, hash
// tiles and entry bundles of c2sp.org/tlog-tiles, and the receipts and
// other documents of provlog's log API under the same prefix. provlog's
// commands that take --log URL and the witness's pull mode share it.
package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/provlog/provlog/log"
)

// MaxResponse bounds a response body when the caller gives no limit.
const MaxResponse = 64 << 20

// A StatusError is an answer other than 200 (and 404, which is
// [log.ErrNotFound]): the status and the start of what the server said.
type StatusError struct {
	URL  string
	Code int
	Msg  string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("GET %s: %d %s", e.URL, e.Code, http.StatusText(e.Code))
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
	return &Client{prefix: strings.TrimSuffix(prefix, "/") + "/", token: token, hc: hc}
}

// Prefix returns the log's prefix, ending in a slash.
func (c *Client) Prefix() string { return c.prefix }

// Get fetches path (relative to the prefix) and returns its body, at most
// limit bytes (0: [MaxResponse]). A 404 wraps [log.ErrNotFound]; another
// status other than 200 is a [*StatusError].
func (c *Client) Get(ctx context.Context, path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxResponse
	}
	url := c.prefix + strings.TrimPrefix(path, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("GET %s: %s: %w", url, firstLine(b), log.ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: url, Code: resp.StatusCode, Msg: firstLine(b)}
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("GET %s: response over %d bytes", url, limit)
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

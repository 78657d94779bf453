package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
)

// remote reads a running sidecar's log API.
type remote struct {
	base  string
	token string
	hc    *http.Client
}

func newRemote(base, token string) *remote {
	return &remote{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{Timeout: time.Minute}}
}

func (r *remote) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return nil, err
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (give a reader token with --token or PROVLOG_TOKEN)"
		}
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, msg)
	}
	return body, nil
}

func (r *remote) receipt(ctx context.Context, index int64, leafHash []byte, size uint64, asCOSE bool) (string, error) {
	q := url.Values{}
	if index >= 0 {
		q.Set("index", strconv.FormatInt(index, 10))
	} else {
		q.Set("hash", hex.EncodeToString(leafHash))
	}
	if size > 0 {
		q.Set("size", strconv.FormatUint(size, 10))
	}
	if asCOSE {
		q.Set("format", "cose")
	}
	b, err := r.get(ctx, "/log/proof/inclusion?"+q.Encode())
	return string(b), err
}

// Checkpoints serves only the log's latest checkpoint: the API publishes
// no history.
func (r *remote) Checkpoints(ctx context.Context, from uint64, fn func(uint64, []byte) error) error {
	cp, err := r.get(ctx, "/log/checkpoint")
	if err != nil {
		return err
	}
	c, err := log.ParseCheckpointNote(cp)
	if err != nil {
		return err
	}
	if c.Size < from {
		return nil
	}
	return fn(c.Size, cp)
}

// Entries reads [start, end) from entry bundles.
func (r *remote) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	var out [][]byte
	for i := start; i < end; {
		n := i / log.TileWidth
		w := log.TileWidth
		if last := (n + 1) * log.TileWidth; last > end {
			w = int(end - n*log.TileWidth)
		}
		t := log.Tile{Level: log.EntriesLevel, N: n, W: w}
		b, err := r.get(ctx, "/log/"+t.Path())
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

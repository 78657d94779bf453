package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/client"
)

// remote reads a running sidecar's log API (log/client), with the
// hints a command line user needs.
type remote struct {
	c *client.Client
	// base, token and hc are for the API's few POSTs (purge).
	base  string
	token string
	hc    *http.Client
}

func newRemote(base, token string) *remote {
	r := &remote{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{Timeout: time.Minute}}
	r.c = client.New(r.base+"/log/", token, r.hc)
	return r
}

// get fetches a path of the sidecar's log API ("/log/...").
func (r *remote) get(ctx context.Context, path string) ([]byte, error) {
	b, err := r.c.Get(ctx, strings.TrimPrefix(path, "/log/"), 0)
	var se *client.StatusError
	if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
		return nil, fmt.Errorf("%w (give a reader token with --token or PROVLOG_TOKEN)", err)
	}
	return b, err
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
	return r.c.Entries(ctx, start, end)
}

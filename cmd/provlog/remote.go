package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/client"
)

// remote reads a running sidecar's log API (log/client), with the
// hints a command line user needs.
type remote struct {
	c *client.Client
}

func newRemote(base, token string) *remote {
	prefix, err := log.JoinURL(base, "log/")
	if err != nil {
		prefix = base // not a URL: every request says so
	}
	return &remote{c: client.New(prefix, token, &http.Client{Timeout: time.Minute})}
}

// get fetches a path of the sidecar's log API ("/log/...").
func (r *remote) get(ctx context.Context, path string) ([]byte, error) {
	b, err := r.c.Get(ctx, strings.TrimPrefix(path, "/log/"), 0)
	return b, tokenHint(err)
}

// tokenHint says how to give a token when the sidecar asked for one.
func tokenHint(err error) error {
	var se *client.StatusError
	if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
		return fmt.Errorf("%w (give a reader token with --token or PROVLOG_TOKEN)", err)
	}
	return err
}

// receipt fetches the receipt of the entry at index, or of the one with
// leafHash when index < 0.
func (r *remote) receipt(ctx context.Context, index int64, leafHash []byte, size uint64, asCOSE bool) (string, error) {
	q := client.ReceiptQuery{Size: size, COSE: asCOSE}
	if index >= 0 {
		q.Index = uint64(index)
	} else {
		q.LeafHash = leafHash
	}
	b, err := r.c.Receipt(ctx, q)
	return string(b), tokenHint(err)
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

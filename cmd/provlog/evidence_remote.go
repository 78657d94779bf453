package main

// `provlog evidence --log URL`: the evidence's inputs read from a running
// sidecar's log API (see export_remote.go for tiles and anchor records).

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/client"
)

// maxProbes bounds how many sizes remoteEvidence.Checkpoints tries: the
// API lists no checkpoint history, so it asks for each size in turn, and
// the checkpoint of an entry's own batch lies at most one batch after it.
const maxProbes = 4096

// remoteEvidence is the log an evidence is written from over HTTP.
type remoteEvidence struct {
	*remoteExport
	size uint64 // the served checkpoint's size
}

// Checkpoint returns the log's own checkpoint of exactly size: the one a
// receipt at that size carries.
func (x *remoteEvidence) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	b, err := x.get(ctx, "/log/proof/inclusion?index=0&size="+strconv.FormatUint(size, 10))
	var se *client.StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %v", log.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	r, err := log.ParseReceipt(b)
	if err != nil {
		return nil, err
	}
	return r.Checkpoint, nil
}

// Checkpoints probes the sizes from from up to the served size.
func (x *remoteEvidence) Checkpoints(ctx context.Context, from uint64, fn func(uint64, []byte) error) error {
	for s, n := from, 0; s <= x.size; s, n = s+1, n+1 {
		if n == maxProbes {
			return fmt.Errorf("no checkpoint among the %d sizes after %d", maxProbes, from)
		}
		c, err := x.Checkpoint(ctx, s)
		if errors.Is(err, log.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(s, c); err != nil {
			return err
		}
	}
	return nil
}

// remoteEvidenceOptions gathers what a running sidecar serves for one
// entry (by index, or by leaf hash when index < 0); anchor records are
// copied into tmp.
func remoteEvidenceOptions(ctx context.Context, r *remote, vkey, tmp string, index int64, leafHash []byte) (*evidence.Options, error) {
	x, err := openRemoteExport(ctx, r, vkey, tmp)
	if err != nil {
		return nil, err
	}
	c, err := log.ParseCheckpointNote(x.checkpoint)
	if err != nil {
		return nil, err
	}
	src := &remoteEvidence{remoteExport: x, size: c.Size}
	i := uint64(index)
	if index < 0 {
		rc, err := r.receipt(ctx, -1, leafHash, 0, false)
		if err != nil {
			return nil, err
		}
		p, err := log.ParseReceipt([]byte(rc))
		if err != nil {
			return nil, err
		}
		i = p.Index
	}
	blk, _ := pem.Decode(x.anchorPub)
	if blk == nil {
		return nil, errors.New("the sidecar's anchoring key is not PEM")
	}
	store, err := anchor.OpenStore(tmp)
	if err != nil {
		return nil, err
	}
	all, err := store.List()
	if err != nil {
		return nil, err
	}
	// Only records the served tree holds: its tiles give the proofs.
	var recs []*anchor.Stored
	for _, st := range all {
		if st.Record != nil && st.Record.Size <= c.Size {
			recs = append(recs, st)
		}
	}
	// The served checkpoint is the newest cosigned one when witnesses
	// cosigned it, else the latest.
	o := &evidence.Options{Source: src, Index: i, VKey: vkey, AnchorKey: blk.Bytes, Records: recs,
		Latest: x.checkpoint, Cosigned: [][]byte{x.checkpoint}}
	o.COSE = func(ctx context.Context, index, size uint64) ([]byte, error) {
		q := url.Values{"index": {strconv.FormatUint(index, 10)}, "size": {strconv.FormatUint(size, 10)}, "format": {"cose"}}
		return r.get(ctx, "/log/proof/inclusion?"+q.Encode())
	}
	return o, nil
}

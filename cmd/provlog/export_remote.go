package main

// `provlog export --log URL`: the bundle's inputs read from a running
// sidecar's log API instead of a data dir.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

// remoteExport is what export needs from a running sidecar: its entries,
// tree nodes computed from hash tiles authenticated against the
// checkpoint, the anchoring key from the genesis entry, and the anchor
// records copied to a local directory.
type remoteExport struct {
	*remote
	hr         tlog.HashReader
	size       uint64 // the checkpoint's: the tree hr vouches for
	checkpoint []byte
	anchorPub  []byte // PEM
	anchorsDir string
	// cosigned says whether the checkpoint carries signatures besides
	// the log's (witness cosignatures).
	cosigned bool
}

// openRemoteExport fetches the checkpoint (verified with v) and the anchor
// records (into tmp) of the sidecar at r.
func openRemoteExport(ctx context.Context, r *remote, vkey string, tmp string) (*remoteExport, error) {
	v, err := parseVerifier(vkey)
	if err != nil {
		return nil, err
	}
	cp, err := r.get(ctx, "/log/checkpoint")
	if err != nil {
		return nil, err
	}
	c, n, err := log.OpenCheckpoint(cp, v)
	if err != nil {
		return nil, fmt.Errorf("the sidecar's checkpoint does not verify with --vkey: %w", err)
	}
	x := &remoteExport{remote: r, size: c.Size, checkpoint: cp, anchorsDir: tmp, cosigned: len(n.UnverifiedSigs) > 0}
	x.hr = tlog.TileHashReader(tlog.Tree{N: int64(c.Size), Hash: tlog.Hash(c.Hash)}, &remoteTiles{ctx: ctx, r: r})
	key, err := genesisAnchorKey(ctx, r)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	x.anchorPub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := r.copyAnchors(ctx, tmp); err != nil {
		return nil, err
	}
	return x, nil
}

// Entries reads entries [start, end), each checked against the tree of
// the checkpoint verified with --vkey: an entry the log API changed (and
// its tiles did not) was written into the bundle, which then failed
// verify-bundle.
func (x *remoteExport) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	return x.checkedEntries(ctx, x.hr, start, end)
}

// checkedEntries reads entries [start, end) of r and checks each against
// the leaf hashes hr reads (from hash tiles, which tlog authenticates
// against a checkpoint's root).
func (r *remote) checkedEntries(ctx context.Context, hr tlog.HashReader, start, end uint64) ([][]byte, error) {
	es, err := r.Entries(ctx, start, end)
	if err != nil {
		return nil, err
	}
	idx := make([]int64, len(es))
	for i := range es {
		idx[i] = tlog.StoredHashIndex(0, int64(start)+int64(i))
	}
	hs, err := hr.ReadHashes(idx)
	if err != nil {
		return nil, fmt.Errorf("reading the tree's leaf hashes of [%d, %d): %w", start, end, err)
	}
	for i, e := range es {
		if !bytes.Equal(log.LeafHash(e), hs[i][:]) {
			return nil, fmt.Errorf("entry %d as the log API served it is not the one its checkpoint's tree holds there (another leaf hash): refusing it", start+uint64(i))
		}
	}
	return es, nil
}

// ReadNodes returns perfect subtree hashes, computed from hash tiles that
// tlog checks against the checkpoint's root; nodes past the checkpoint's
// tree are not held (bundle.ErrNotHeld).
func (x *remoteExport) ReadNodes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	idx := make([]int64, len(ids))
	for i, id := range ids {
		if end := (id.Index + 1) << id.Level; end > x.size || end>>id.Level != id.Index+1 {
			return nil, fmt.Errorf("node at level %d index %d lies past the sidecar's checkpoint (size %d): %w", id.Level, id.Index, x.size, bundle.ErrNotHeld)
		}
		idx[i] = tlog.StoredHashIndex(int(id.Level), int64(id.Index))
	}
	hs, err := x.hr.ReadHashes(idx)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out, nil
}

// copyAnchors writes every anchor record the sidecar lists into dir.
func (r *remote) copyAnchors(ctx context.Context, dir string) error {
	after := ""
	for {
		q := "/log/anchors"
		if after != "" {
			q += "?after=" + url.QueryEscape(after)
		}
		b, err := r.get(ctx, q)
		if err != nil {
			return err
		}
		var page []online.Summary
		if err := json.Unmarshal(b, &page); err != nil {
			return fmt.Errorf("reading %s: %w", q, err)
		}
		if len(page) == 0 {
			return nil
		}
		for _, s := range page {
			if filepath.Base(s.Name) != s.Name || s.Name == "." || s.Name == ".." {
				return fmt.Errorf("the sidecar lists an anchor record named %q", s.Name)
			}
			rec, err := r.get(ctx, "/log/anchors/"+url.PathEscape(s.Name))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, s.Name), rec, 0o644); err != nil {
				return err
			}
		}
		after = page[len(page)-1].Name
	}
}

// remoteTiles reads a remote log's hash tiles for tlog.TileHashReader.
type remoteTiles struct {
	ctx context.Context
	r   *remote
}

func (t *remoteTiles) Height() int                         { return log.TileHeight }
func (t *remoteTiles) SaveTiles(_ []tlog.Tile, _ [][]byte) {}

func (t *remoteTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tl := range tiles {
		p := log.Tile{Level: tl.L, N: uint64(tl.N), W: tl.W}
		b, err := t.r.get(t.ctx, "/log/"+p.Path())
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

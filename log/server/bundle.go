package server

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/provlog/provlog/log"
)

// bundleChunk is how many entries of an entry bundle are read and written
// at a time: at most 1 MiB of entries of the largest size (64 KiB), where
// a full bundle of them is 16 MiB. Holding bundles whole, 50 clients
// reading one at once grew the heap by 1.2-1.4 GiB (TestEntryBundleMemory).
const bundleChunk = 16

// entryBundle serves an entry bundle according to c2sp.org/tlog-tiles,
// bundleChunk entries at a time. The first part is read before the answer
// begins (prepare), so that a store that cannot be read gets its error
// status; a later part that cannot be read aborts the answer.
func (a *api) entryBundle(ctx context.Context, path string, q url.Values) (*response, error) {
	t, err := a.tile(ctx, path, q)
	if err != nil {
		return nil, err
	}
	start := t.N * log.TileWidth
	end := start + uint64(t.W)
	read := func(from uint64) ([]byte, error) {
		to := min(end, from+bundleChunk)
		entries, err := a.opts.Store.Entries(ctx, from, to)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		// A bundle is its entries' encodings one after the other, so its
		// parts are bundles too.
		b, err := log.MarshalEntryBundle(entries)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", path, err)
		}
		return b, nil
	}
	// The entries' leaf hashes name the bundle's content: its ETag, which
	// a client that holds the bundle gets a 304 on without a read of them.
	leaves, err := a.opts.Store.ReadNodes(ctx, log.Tile{Level: 0, N: t.N, W: t.W}.NodeIDs())
	if err != nil {
		return nil, fmt.Errorf("reading the leaf hashes of %s: %w", path, err)
	}
	var first []byte
	prepare := func() (err error) {
		first, err = read(start)
		return err
	}
	stream := func(w io.Writer) error {
		part := first
		for from := start + bundleChunk; ; from += bundleChunk {
			if _, err := w.Write(part); err != nil {
				return err
			}
			if from >= end {
				return nil
			}
			if part, err = read(from); err != nil {
				return err
			}
		}
	}
	return &response{contentType: "application/octet-stream", cache: a.tileCache(t, true), prepare: prepare, stream: stream, etag: etagOf('b', leaves...)}, nil
}

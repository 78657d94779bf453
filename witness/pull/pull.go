// Package pull checks a c2sp.org/tlog-tiles log from the outside, as a
// witness that nobody has to call: it fetches the log's checkpoint, builds
// the consistency proof from the last checkpoint it recorded out of the
// log's hash tiles (authenticated against the new checkpoint's root, with
// golang.org/x/mod/sumdb/tlog), verifies it and records the new
// checkpoint. It reads nothing but the checkpoint and hash tiles, so it
// works on any tlog-tiles log (provlog's /log/ API, Tessera, ...).
//
// When the log contradicts itself, [Check] returns [witness.Evidence] and
// an error wrapping [ErrFork] (conclusive: the two signed checkpoints
// cannot both be true) or [ErrRollback] (the log went back to a smaller
// tree and no longer serves the larger one it signed), and records
// nothing. A log that serves an older checkpoint consistent with the
// recorded one is stale; stale for longer than Options.MaxStale, it is an
// error wrapping [ErrStale].
package pull

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/client"
	"github.com/provlog/provlog/witness"
)

var (
	// ErrFork is returned (wrapped) with conclusive evidence of a fork.
	ErrFork = errors.New("the log signed two checkpoints that cannot both be true")
	// ErrRollback is returned (wrapped) when the log serves a smaller tree
	// than a checkpoint it signed before and no longer serves that one's.
	ErrRollback = errors.New("the log rolled back to a smaller tree")
	// ErrStale is returned (wrapped) when the log has served only older
	// checkpoints than the recorded one for longer than Options.MaxStale:
	// a cache explains a while, not for ever, and a log that hides its
	// newer tree from its checkers is not checked.
	ErrStale = errors.New("the log has served only older checkpoints than the one recorded for too long")
)

// DefaultMaxStale is Options.MaxStale's default.
const DefaultMaxStale = time.Hour

// maxCheckpointSize bounds the checkpoint note fetched.
const maxCheckpointSize = 1 << 20

// Options configure [Check].
type Options struct {
	// URL is the log's tlog-tiles prefix: the checkpoint is at
	// URL/checkpoint and tiles at URL/tile/... If URL/checkpoint is not
	// found, URL/log/ is tried, so a provlog sidecar's base URL works too.
	URL string
	// Verifier is the log's key.
	Verifier note.Verifier
	// Origin is the log's origin; default the verifier's key name.
	Origin string
	// Store records the last verified checkpoint per origin.
	Store witness.Store
	// Client makes the requests; nil means http.DefaultClient. Bound it
	// with a timeout.
	Client *http.Client
	// MaxStale bounds how long the log may serve only checkpoints older
	// than the recorded one (DefaultMaxStale): counted from the first
	// check that found it stale, which the store keeps (see [StaleKey]),
	// until a check finds it serving the recorded tree or a larger one.
	MaxStale time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// StaleKey is the name under which Check keeps, in Options.Store, when it
// first found the log of origin stale (RFC 3339; empty when it is not).
// No origin holds a newline, so it is no log's origin.
func StaleKey(origin string) string { return origin + "\nstale-since" }

// A Result is what one check found.
type Result struct {
	// Previous is the checkpoint recorded before, nil on the first check.
	Previous *log.Checkpoint
	// Current is the checkpoint the log serves now.
	Current log.Checkpoint
	// Recorded says the current checkpoint was recorded: it is larger than
	// the previous one and consistent with it.
	Recorded bool
	// Stale says the log served a checkpoint older than the recorded one,
	// consistent with it (a cache, perhaps); nothing was recorded.
	// StaleSince is when a check first found it so.
	Stale      bool
	StaleSince time.Time
	// Evidence is set with ErrFork and ErrRollback.
	Evidence *witness.Evidence
}

// Check fetches the log's checkpoint, checks it against the one recorded
// for its origin, and records it if it is newer and consistent.
func Check(ctx context.Context, opts Options) (*Result, error) {
	if opts.Verifier == nil || opts.Store == nil {
		return nil, errors.New("pull: a verifier and a store are required")
	}
	origin := opts.Origin
	if origin == "" {
		origin = opts.Verifier.Name()
	}
	lc, body, err := fetchCheckpoint(ctx, opts.URL, opts.Client)
	if err != nil {
		return nil, fmt.Errorf("fetching the checkpoint: %w", err)
	}
	cur, kept, err := openCheckpoint(body, opts.Verifier, origin)
	if err != nil {
		return nil, fmt.Errorf("the log's checkpoint: %w", err)
	}
	// note.Open passed over a line written twice and a second line by the
	// log's key, unverified; a strict reader refuses such a note. It fails
	// the check once it proves no fork or rollback: a fork served so still
	// yields its evidence (from the note as verified).
	strict := witness.CheckSignatureLines(body, note.VerifierList(opts.Verifier))
	if strict != nil {
		strict = fmt.Errorf("the log's checkpoint is refused by a strict signed-note reader: %w", strict)
	}
	return compare(ctx, opts, origin, lc, cur, kept, strict)
}

// compare is Check for the log's checkpoint cur (its note kept, as
// verified), fetched through lc: where it would record cur or find it
// unchanged or stale, it returns strict instead if that is not nil.
func compare(ctx context.Context, opts Options, origin string, lc *client.Client, cur log.Checkpoint, kept []byte, strict error) (*Result, error) {
	res := &Result{Current: cur}
	rec, err := opts.Store.Latest(ctx, origin)
	if err != nil {
		return nil, err
	}
	record := func() (*Result, error) {
		if strict != nil {
			return nil, strict
		}
		if err := opts.Store.Swap(ctx, origin, rec, kept); err != nil {
			return nil, fmt.Errorf("recording the checkpoint: %w", err)
		}
		res.Recorded = true
		return res, clearStale(ctx, opts.Store, origin)
	}
	if rec == nil {
		return record()
	}
	prev, recKept, err := openCheckpoint(rec, opts.Verifier, origin)
	if err != nil {
		return nil, fmt.Errorf("the recorded checkpoint: %w", err)
	}
	res.Previous = &prev
	if cur.Size > math.MaxInt64 || prev.Size > math.MaxInt64 {
		return nil, errors.New("tree size out of range")
	}
	// Evidence holds the notes as verified, not as served: a line written
	// twice, which note.Open passes over, would make it unverifiable.
	c := &comparison{rec: recKept, body: kept, prev: prev, cur: cur, v: opts.Verifier, origin: origin,
		tiles: &tileReader{ctx: ctx, lc: lc, cache: map[tlog.Tile][]byte{}}}

	switch {
	case cur.Size == prev.Size:
		if bytes.Equal(cur.Hash, prev.Hash) {
			if strict != nil {
				return nil, strict
			}
			return res, clearStale(ctx, opts.Store, origin)
		}
		res.Evidence = witness.ForkFromProof(recKept, kept, nil)
		return res, fmt.Errorf("%w: %s", ErrFork, res.Evidence.Detail)

	case prev.Size == 0:
		// Every tree extends the empty one.
		return record()

	case cur.Size == 0:
		// The log went back to the empty tree: it cannot serve the
		// larger one any more.
		res.Evidence = rollback(origin, kept, recKept, cur, prev, errors.New("the log is empty"))
		return res, fmt.Errorf("%w: %s", ErrRollback, res.Evidence.Detail)

	case cur.Size > prev.Size:
		ev, err := c.grown()
		if err != nil {
			return nil, err
		}
		if ev == nil {
			return record()
		}
		res.Evidence = ev
		return res, fmt.Errorf("%w: %s", ErrFork, ev.Detail)

	default: // cur.Size < prev.Size
		res, err := c.shrunk(res)
		if err != nil || !res.Stale {
			return res, err
		}
		if strict != nil {
			return nil, strict
		}
		return staleFor(ctx, opts, origin, res)
	}
}

// staleFor notes when the log was first found stale, if this is the first
// check to find it so, and returns res, with an error wrapping ErrStale
// once that is over opts.MaxStale ago.
func staleFor(ctx context.Context, opts Options, origin string, res *Result) (*Result, error) {
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	bound := opts.MaxStale
	if bound <= 0 {
		bound = DefaultMaxStale
	}
	key := StaleKey(origin)
	old, err := opts.Store.Latest(ctx, key)
	if err != nil {
		return nil, err
	}
	since, err := time.Parse(time.RFC3339Nano, string(old))
	if len(old) == 0 || err != nil {
		since = now
		if err := opts.Store.Swap(ctx, key, old, []byte(now.UTC().Format(time.RFC3339Nano))); err != nil {
			return nil, fmt.Errorf("noting when the log was found stale: %w", err)
		}
	}
	res.StaleSince = since
	if d := now.Sub(since); d > bound {
		return res, fmt.Errorf("%w: it serves size %d, and nothing as large as the recorded size %d since %s (%s, over the bound of %s)",
			ErrStale, res.Current.Size, res.Previous.Size, since.UTC().Format(time.RFC3339), d.Round(time.Second), bound)
	}
	return res, nil
}

// clearStale forgets when the log was found stale: it serves the recorded
// tree or a larger one.
func clearStale(ctx context.Context, store witness.Store, origin string) error {
	key := StaleKey(origin)
	old, err := store.Latest(ctx, key)
	if err != nil || len(old) == 0 {
		return err
	}
	if err := store.Swap(ctx, key, old, []byte{}); err != nil {
		return fmt.Errorf("forgetting when the log was found stale: %w", err)
	}
	return nil
}

// A comparison is the recorded checkpoint prev (its note rec) and the one
// the log serves, cur (its note body), both of origin, opened with v and
// written as verified ([witness.Verified]), with the log's tiles to prove
// one against the other.
type comparison struct {
	rec, body []byte
	prev, cur log.Checkpoint
	v         note.Verifier
	origin    string
	tiles     *tileReader
}

// grown checks a current tree larger than the recorded one: it returns
// nil if the current one extends it, or the evidence of a fork.
func (c *comparison) grown() (*witness.Evidence, error) {
	hr := tlog.TileHashReader(tree(c.cur), c.tiles)
	p, err := tlog.ProveTree(int64(c.cur.Size), int64(c.prev.Size), hr)
	if err != nil {
		return nil, fmt.Errorf("building the consistency proof from size %d to %d from the log's tiles: %w", c.prev.Size, c.cur.Size, err)
	}
	if tlog.CheckTree(p, int64(c.cur.Size), tlog.Hash(c.cur.Hash), int64(c.prev.Size), tlog.Hash(c.prev.Hash)) == nil {
		return nil, nil
	}
	return forkEvidence(c.rec, c.body, c.prev, c.cur, hr, p, c.v)
}

// shrunk checks a current tree smaller than the recorded one: stale if
// the recorded tree holds it, a rollback if the log cannot prove that, a
// fork if it proves otherwise.
func (c *comparison) shrunk(res *Result) (*Result, error) {
	hr := tlog.TileHashReader(tree(c.prev), c.tiles)
	root, err := tlog.TreeHash(int64(c.cur.Size), hr)
	if err != nil {
		res.Evidence = rollback(c.origin, c.body, c.rec, c.cur, c.prev, err)
		return res, fmt.Errorf("%w: %s", ErrRollback, res.Evidence.Detail)
	}
	if bytes.Equal(root[:], c.cur.Hash) {
		res.Stale = true
		return res, nil
	}
	p, err := tlog.ProveTree(int64(c.prev.Size), int64(c.cur.Size), hr)
	if err != nil {
		return nil, fmt.Errorf("building the consistency proof from size %d to %d from the log's tiles: %w", c.cur.Size, c.prev.Size, err)
	}
	ev, err := forkEvidence(c.body, c.rec, c.cur, c.prev, hr, p, c.v)
	if err != nil {
		return nil, err
	}
	res.Evidence = ev
	return res, fmt.Errorf("%w: %s", ErrFork, ev.Detail)
}

// fetchCheckpoint fetches the checkpoint of the log at url, or of the
// provlog sidecar whose base URL it is (then the log is under url/log/),
// and returns the client for the one that answered. hc nil means
// http.DefaultClient.
func fetchCheckpoint(ctx context.Context, url string, hc *http.Client) (*client.Client, []byte, error) {
	lc := client.New(url, "", hc)
	body, err := lc.Get(ctx, "checkpoint", maxCheckpointSize)
	if errors.Is(err, log.ErrNotFound) {
		under, _ := log.JoinURL(lc.Prefix(), "log/") // lc's prefix parsed: it answered
		sidecar := client.New(under, "", hc)
		if b, err2 := sidecar.Get(ctx, "checkpoint", maxCheckpointSize); err2 == nil {
			return sidecar, b, nil
		}
	}
	return lc, body, err
}

// rollback makes the evidence of a log that went back from prev to the
// smaller cur and does not serve prev's tree (why).
func rollback(origin string, curNote, prevNote []byte, cur, prev log.Checkpoint, why error) *witness.Evidence {
	return &witness.Evidence{
		Kind:        witness.EvidenceRollback,
		Origin:      origin,
		Checkpoints: [2]string{string(curNote), string(prevNote)},
		Found:       time.Now().UTC().Truncate(time.Second),
		Detail: fmt.Sprintf("the log serves a checkpoint of size %d after signing one of size %d, and no longer serves the tiles of the larger tree (%v)",
			cur.Size, prev.Size, why),
	}
}

// forkEvidence makes evidence from two checkpoints whose consistency proof
// failed: the larger tree's root at the smaller size, read through hr
// (authenticated against the larger checkpoint), and the proof p. It
// checks the evidence with v before returning it.
func forkEvidence(smallNote, largeNote []byte, small, large log.Checkpoint, hr tlog.HashReader, p tlog.TreeProof, v note.Verifier) (*witness.Evidence, error) {
	root, err := tlog.TreeHash(int64(small.Size), hr)
	if err != nil {
		return nil, fmt.Errorf("reading the root at size %d from the log's tiles: %w", small.Size, err)
	}
	ev := &witness.Evidence{
		Kind:              witness.EvidenceFork,
		Origin:            small.Origin,
		Checkpoints:       [2]string{string(smallNote), string(largeNote)},
		RootAtSmallerSize: base64.StdEncoding.EncodeToString(root[:]),
		Found:             time.Now().UTC().Truncate(time.Second),
		Detail: fmt.Sprintf("the checkpoint of size %d commits to root %s at size %d, but the log also signed root %s at that size",
			large.Size, base64.StdEncoding.EncodeToString(root[:]), small.Size, base64.StdEncoding.EncodeToString(small.Hash)),
	}
	for _, h := range p {
		ev.Proof = append(ev.Proof, base64.StdEncoding.EncodeToString(h[:]))
	}
	if err := ev.Verify(v); err != nil {
		return nil, fmt.Errorf("the consistency proof from size %d to %d fails, yet shows no fork: %w", small.Size, large.Size, err)
	}
	return ev, nil
}

func tree(c log.Checkpoint) tlog.Tree {
	return tlog.Tree{N: int64(c.Size), Hash: tlog.Hash(c.Hash)}
}

// openCheckpoint verifies a checkpoint note with v and parses it. It also
// returns the note with only v's signature, as it is recorded
// ([witness.Verified]: the log's checkpoint carries its witnesses'
// cosignatures too).
func openCheckpoint(msg []byte, v note.Verifier, origin string) (log.Checkpoint, []byte, error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return log.Checkpoint{}, nil, err
	}
	c, err := log.ParseCheckpoint(n.Text)
	if err != nil {
		return log.Checkpoint{}, nil, err
	}
	if c.Origin != origin {
		return log.Checkpoint{}, nil, fmt.Errorf("origin %q is not %q", c.Origin, origin)
	}
	return c, witness.Verified(n), nil
}

// tileReader is a tlog.TileReader over a tlog-tiles log's hash tiles. It
// keeps the tiles tlog authenticated (SaveTiles) for the rest of one check.
type tileReader struct {
	ctx context.Context
	lc  *client.Client

	mu    sync.Mutex
	cache map[tlog.Tile][]byte
}

func (r *tileReader) Height() int { return log.TileHeight }

func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, t := range tiles {
		r.cache[t] = data[i]
	}
}

// ReadTiles fetches the tiles, a few at a time. A partial tile the log
// does not serve is read from the full tile, which holds it as a prefix.
func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	errs := make([]error, len(tiles))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, t := range tiles {
		r.mu.Lock()
		d, ok := r.cache[t]
		r.mu.Unlock()
		if ok {
			out[i] = d
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = r.readTile(t)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *tileReader) readTile(t tlog.Tile) ([]byte, error) {
	if t.H != log.TileHeight || t.L < 0 || t.W < 1 || t.W > log.TileWidth {
		return nil, fmt.Errorf("unexpected tile %v", t)
	}
	lt := log.Tile{Level: t.L, N: uint64(t.N), W: t.W}
	want := t.W * log.HashSize
	b, err := r.lc.Tile(r.ctx, lt)
	if errors.Is(err, log.ErrNotFound) && t.W < log.TileWidth {
		lt.W = log.TileWidth
		b, err = r.lc.Tile(r.ctx, lt)
	}
	if err != nil {
		return nil, err
	}
	if len(b) < want || (lt.W == t.W && len(b) != want) {
		return nil, fmt.Errorf("tile %s is %d bytes, want %d", lt.Path(), len(b), want)
	}
	return b[:want], nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
)

// logImpl is what every phase needs from a log under test.
type logImpl interface {
	// add appends e and waits for its durable acknowledgement: provlog's
	// Append (a receipt with a signed checkpoint and proof), Tessera's
	// resolved index future (durably sequenced and integrated, not yet
	// published).
	add(ctx context.Context, e []byte) (uint64, error)
	// published waits until a published signed checkpoint covers size
	// entries and returns it.
	published(ctx context.Context, size uint64) ([]byte, error)
	// addAndProve appends e and returns its index, a signed checkpoint
	// covering it and the inclusion proof of e in that checkpoint's tree.
	addAndProve(ctx context.Context, e []byte) (idx uint64, proof [][]byte, cp []byte, err error)
	// prover returns a function that builds inclusion proofs in the tree of
	// the given size; each goroutine calls prover once for its own.
	prover(ctx context.Context, size uint64) func(i uint64) ([][]byte, error)
	// readEntries calls fn for each entry in [0, size), in index order.
	readEntries(ctx context.Context, size uint64, fn func(i uint64, e []byte) error) error
	close(ctx context.Context) error
	// diagnostics describes the implementation's own counters, if any.
	diagnostics() string
}

// ---------------------------------------------------------------------------
// provlog: logpebble store + server.Sequencer.

type provlogImpl struct {
	store *logpebble.Store
	seq   *server.Sequencer
}

func openProvlog(ctx context.Context, dir string, s note.Signer, v note.Verifier) (*provlogImpl, error) {
	st, err := logpebble.Open(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("logpebble.Open: %w", err)
	}
	seq, err := server.OpenSequencer(ctx, st, s, v, nil)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("OpenSequencer: %w", err)
	}
	return &provlogImpl{store: st, seq: seq}, nil
}

func (p *provlogImpl) add(ctx context.Context, e []byte) (uint64, error) {
	r, err := p.seq.Append(ctx, e)
	if err != nil {
		return 0, err
	}
	return r.Index, nil
}

func (p *provlogImpl) published(ctx context.Context, size uint64) ([]byte, error) {
	sz, cp := p.seq.Checkpoint()
	if sz < size {
		return nil, fmt.Errorf("provlog: checkpoint size %d below %d after every append returned", sz, size)
	}
	return cp, nil
}

func (p *provlogImpl) addAndProve(ctx context.Context, e []byte) (uint64, [][]byte, []byte, error) {
	r, err := p.seq.Append(ctx, e)
	if err != nil {
		return 0, nil, nil, err
	}
	return r.Index, r.Proof, r.Checkpoint, nil
}

func (p *provlogImpl) prover(ctx context.Context, size uint64) func(uint64) ([][]byte, error) {
	return func(i uint64) ([][]byte, error) { return log.ProveInclusion(ctx, p.store, i, size) }
}

func (p *provlogImpl) readEntries(ctx context.Context, size uint64, fn func(uint64, []byte) error) error {
	for start := uint64(0); start < size; start += 256 {
		end := min(start+256, size)
		es, err := p.store.Entries(ctx, start, end)
		if err != nil {
			return err
		}
		if len(es) != int(end-start) {
			return fmt.Errorf("Entries(%d, %d) returned %d entries", start, end, len(es))
		}
		for i, e := range es {
			if err := fn(start+uint64(i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *provlogImpl) diagnostics() string {
	st := p.seq.Stats()
	if st.Commits == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f entries/commit, %.2f ms/commit", float64(st.Appends)/float64(st.Commits), float64(st.CommitNanos)/float64(st.Commits)/1e6)
}

func (p *provlogImpl) close(context.Context) error {
	return errors.Join(p.seq.Close(), p.store.Close())
}

// ---------------------------------------------------------------------------
// Tessera v1.0.4, POSIX driver.

type tesseraConfig struct {
	BatchSize  uint
	BatchAge   time.Duration
	CPInterval time.Duration
	Poll       time.Duration
}

func (c tesseraConfig) String() string {
	return fmt.Sprintf("WithBatching(%d, %v), WithCheckpointInterval(%v), PublicationAwaiter poll %v", c.BatchSize, c.BatchAge, c.CPInterval, c.Poll)
}

type tesseraImpl struct {
	app      *tessera.Appender
	shutdown func(context.Context) error
	reader   tessera.LogReader
	awaiter  *tessera.PublicationAwaiter
	cancel   context.CancelFunc
}

func openTessera(ctx context.Context, dir string, s note.Signer, cfg tesseraConfig) (*tesseraImpl, error) {
	ctx, cancel := context.WithCancel(ctx)
	drv, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("posix.New: %w", err)
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(s).
		WithBatching(cfg.BatchSize, cfg.BatchAge).
		WithCheckpointInterval(cfg.CPInterval)
	app, shutdown, reader, err := tessera.NewAppender(ctx, drv, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("tessera.NewAppender: %w", err)
	}
	return &tesseraImpl{
		app:      app,
		shutdown: shutdown,
		reader:   reader,
		awaiter:  tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, cfg.Poll),
		cancel:   cancel,
	}, nil
}

func (t *tesseraImpl) add(ctx context.Context, e []byte) (uint64, error) {
	idx, err := t.app.Add(ctx, tessera.NewEntry(e))()
	return idx.Index, err
}

func (t *tesseraImpl) published(ctx context.Context, size uint64) ([]byte, error) {
	if size == 0 {
		return t.reader.ReadCheckpoint(ctx)
	}
	_, cp, err := t.awaiter.Await(ctx, func() (tessera.Index, error) { return tessera.Index{Index: size - 1}, nil })
	return cp, err
}

func (t *tesseraImpl) addAndProve(ctx context.Context, e []byte) (uint64, [][]byte, []byte, error) {
	idx, cp, err := t.awaiter.Await(ctx, t.app.Add(ctx, tessera.NewEntry(e)))
	if err != nil {
		return 0, nil, nil, err
	}
	c, err := log.ParseCheckpointNote(cp) // signature checked by the caller, off the clock
	if err != nil {
		return 0, nil, nil, err
	}
	pb, err := client.NewProofBuilder(ctx, c.Size, t.reader.ReadTile)
	if err != nil {
		return 0, nil, nil, err
	}
	p, err := pb.InclusionProof(ctx, idx.Index)
	if err != nil {
		return 0, nil, nil, err
	}
	return idx.Index, p, cp, nil
}

// prover builds every proof with a fresh ProofBuilder, so each proof reads
// its tiles from the log's storage as provlog's reads its nodes from
// Pebble; a ProofBuilder kept across proofs would end up caching every
// tile of the tree in memory.
func (t *tesseraImpl) prover(ctx context.Context, size uint64) func(uint64) ([][]byte, error) {
	return func(i uint64) ([][]byte, error) {
		pb, err := client.NewProofBuilder(ctx, size, t.reader.ReadTile)
		if err != nil {
			return nil, err
		}
		return pb.InclusionProof(ctx, i)
	}
}

func (t *tesseraImpl) readEntries(ctx context.Context, size uint64, fn func(uint64, []byte) error) error {
	for b := uint64(0); b*layout.EntryBundleWidth < size; b++ {
		raw, err := t.reader.ReadEntryBundle(ctx, b, layout.PartialTileSize(0, b, size))
		if err != nil {
			return fmt.Errorf("entry bundle %d: %w", b, err)
		}
		var eb api.EntryBundle
		if err := eb.UnmarshalText(raw); err != nil {
			return fmt.Errorf("entry bundle %d: %w", b, err)
		}
		want := min(uint64(layout.EntryBundleWidth), size-b*layout.EntryBundleWidth)
		if uint64(len(eb.Entries)) < want {
			return fmt.Errorf("entry bundle %d has %d entries, want %d", b, len(eb.Entries), want)
		}
		for i, e := range eb.Entries[:want] {
			if err := fn(b*layout.EntryBundleWidth+uint64(i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *tesseraImpl) diagnostics() string { return "" }

func (t *tesseraImpl) close(ctx context.Context) error {
	err := t.shutdown(ctx)
	t.cancel()
	return err
}

// rootOf recomputes the RFC 6962 root over the entries [0, size) of l, in
// index order, with a compact range.
func rootOf(ctx context.Context, l logImpl, size uint64, check func(i uint64, e []byte) error) ([]byte, error) {
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	if err := l.readEntries(ctx, size, func(i uint64, e []byte) error {
		if err := check(i, e); err != nil {
			return err
		}
		return rng.Append(rfc6962.DefaultHasher.HashLeaf(e), nil)
	}); err != nil {
		return nil, err
	}
	if rng.End() != size {
		return nil, fmt.Errorf("read %d entries, want %d", rng.End(), size)
	}
	return rng.GetRootHash(nil)
}

// Package server runs a provlog log: the [Sequencer], which group-commits
// appends from any number of goroutines and answers each with a signed
// receipt, and the HTTP read API (c2sp.org/tlog-tiles plus proofs).
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// ErrClosed is returned by Append after the sequencer was closed.
var ErrClosed = errors.New("log is closed")

// DefaultMaxBatch is the most entries one commit carries.
const DefaultMaxBatch = 4096

// SequencerOptions tune a [Sequencer]; the zero value is usable.
type SequencerOptions struct {
	// MaxBatch bounds the entries per commit (DefaultMaxBatch if 0).
	MaxBatch int
	// Genesis, if not nil, is appended as entry 0 when the store is empty.
	Genesis func() ([]byte, error)
	// CommitDelay is the longest a commit waits for appends announced
	// with [Sequencer.Expect] (0: never wait). It waits only under load
	// (the previous commit carried more than one entry) and only while an
	// announced append has not arrived, so a lone append is committed at
	// once. Waiting trades at most this much latency for fewer commits:
	// each commit costs an fdatasync and a checkpoint signature whatever
	// it carries.
	CommitDelay time.Duration
	// RetryDiskFull, if positive, makes the sequencer try to [Sequencer.Resume]
	// a log that stopped on a full disk: first after this long, then
	// backing off to a try every 30 s while the disk stays full
	// (resume.go). Other faults are never retried.
	RetryDiskFull time.Duration
	// Shown, if not nil, is called with each newer checkpoint before it
	// leaves the sequencer (in a receipt, or as the latest checkpoint),
	// once per size and never an older one after a newer: what the
	// program keeps of it outside the store (provlog keeps the newest in
	// its data dir for a shared store) is never behind what was handed
	// out. An error stops the log, as a failed commit does.
	Shown func(cp []byte) error
}

// DefaultCommitDelay is the commit delay provlog serve uses unless
// configured otherwise.
const DefaultCommitDelay = 2 * time.Millisecond

// A Sequencer is the single writer of a log. Appends wait in a queue, and
// one caller at a time leads: it takes everything waiting, assigns
// indices, extends the tree, signs a checkpoint for the new size and
// commits it all as one durable batch; then each caller gets its receipt,
// and the first of those that queued meanwhile leads the next commit. No
// timer and no other goroutine stands between an append and its receipt:
// a lone append is committed at once by its own caller, and appends that
// arrive during a commit share the next one.
type Sequencer struct {
	store    log.Storage
	signer   note.Signer
	maxBatch int
	delay    time.Duration
	expected atomic.Int64  // announcements not yet withdrawn (Expected.Cancel)
	wake     chan struct{} // a commit waiting on expected re-checks it

	qmu     sync.Mutex
	queue   []*request // appends and resumes not yet taken, in arrival order
	leading bool       // a caller leads; set while queue is not empty

	// Owned by the caller that leads (handed on under qmu).
	batch   []*request // what the commit under way took from the queue
	drained []*request // what it took since, waiting for a shared store's lock
	last    int        // entries in the last commit
	timer   *time.Timer

	shown     func(cp []byte) error // SequencerOptions.Shown
	showMu    sync.Mutex            // serializes shown, keeping lastShown
	lastShown uint64

	mu      sync.RWMutex
	size    uint64
	cp      []byte // signed checkpoint for size
	root    []byte
	failed  error // sticky: set when a commit failed
	closing bool

	rng    *compact.Range
	shared log.SharedStorage // nil unless the store has other writers
	// unavailable is the error of the last commit to a shared store, if
	// it failed writing nothing, and when (sequencer_shared.go).
	unavailable atomic.Pointer[unavailableCommit]
	askMu       sync.Mutex    // one CatchUp question to a shared store at a time
	asked       atomic.Uint64 // CatchUp questions begun
	verifier    note.Verifier
	done        chan struct{}
	wg          sync.WaitGroup // retryDiskFull
	senders     sync.WaitGroup // appends and resumes that passed the closing check, until answered

	stats Stats
}

// Stats counts what a sequencer has done since it started.
type Stats struct {
	Appends      uint64 // entries committed
	Commits      uint64 // batches committed
	CommitErrors uint64
	CommitNanos  uint64 // total time spent in Storage.Commit
	Expected     int64  // announced appends (Expect) not yet appended or withdrawn
}

type request struct {
	entry    []byte
	leafHash []byte
	fence    log.Fence // honoured by a shared store (sequencer_shared.go)
	resume   bool      // a Resume, not an append (resume.go)
	// reply carries, at most once, the lead, and then the outcome.
	reply chan result
}

// result is what a request gets: the lead, or where the entry landed and
// the nodes from which its inclusion proof is built without touching
// storage.
type result struct {
	lead  bool
	index uint64
	size  uint64
	cp    []byte
	nodes memNodes
	err   error
}

// OpenSequencer starts the sequencer for store, signing checkpoints with
// signer (whose key name is the log's origin) and checking the stored
// state with verifier, the signer's public half. The stored state must be
// intact: its compact range must hash to the root of its last signed
// checkpoint, or OpenSequencer reports corruption and does not start.
func OpenSequencer(ctx context.Context, store log.Storage, signer note.Signer, verifier note.Verifier, opts *SequencerOptions) (*Sequencer, error) {
	if opts == nil {
		opts = &SequencerOptions{}
	}
	if signer.Name() != verifier.Name() || signer.KeyHash() != verifier.KeyHash() {
		return nil, errors.New("sequencer: signer and verifier are not one key pair")
	}
	st, err := store.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading log state: %w", err)
	}
	rng, root, err := openTree(st, verifier)
	if err != nil {
		return nil, err
	}
	s := &Sequencer{
		store:    store,
		signer:   signer,
		maxBatch: opts.MaxBatch,
		delay:    opts.CommitDelay,
		wake:     make(chan struct{}, 1),
		size:     st.Size,
		cp:       st.Checkpoint,
		root:     root,
		rng:      rng,
		verifier: verifier,
		done:     make(chan struct{}),
		shown:    opts.Shown,
	}
	if s.maxBatch <= 0 {
		s.maxBatch = DefaultMaxBatch
	}
	// The stored checkpoint is the latest from now on: on a shared log
	// another writer's, never shown by this process.
	if err := s.show(st.Size, st.Checkpoint); err != nil {
		return nil, err
	}
	s.openShared()
	if opts.RetryDiskFull > 0 && s.shared == nil {
		s.wg.Add(1)
		go s.retryDiskFull(opts.RetryDiskFull)
	}
	if st.Size == 0 && opts.Genesis != nil {
		g, err := opts.Genesis()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("making genesis entry: %w", err)
		}
		if _, err := s.appendGenesis(ctx, g); err != nil {
			s.Close()
			return nil, fmt.Errorf("appending genesis entry: %w", err)
		}
	}
	return s, nil
}

// openTree checks a stored state: its compact range fits its size and
// hashes to the root of its signed checkpoint. It returns the range and
// the root (nil for the empty tree).
func openTree(st log.State, verifier note.Verifier) (*compact.Range, []byte, error) {
	rf := &compact.RangeFactory{Hash: log.NodeHash}
	rng, err := rf.NewRange(0, st.Size, cloneHashes(st.Range))
	if err != nil {
		return nil, nil, fmt.Errorf("log state is corrupt: compact range does not fit size %d: %w", st.Size, err)
	}
	if st.Size == 0 {
		return rng, nil, nil
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("log state is corrupt: %w", err)
	}
	c, _, err := log.OpenCheckpoint(st.Checkpoint, verifier)
	var unverified *note.UnverifiedNoteError
	if errors.As(err, &unverified) {
		// Signed, but by none of this key: most likely the key files are
		// another log's (or were made anew), not a damaged store.
		return nil, nil, fmt.Errorf("the key is not this log's, or its state is corrupt: the last checkpoint is not signed by the log key given (%s, key hash %08x); are the key files this log's own? %w", verifier.Name(), verifier.KeyHash(), err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("log state is corrupt: last checkpoint: %w", err)
	}
	if c.Size != st.Size || !bytes.Equal(c.Hash, root) {
		return nil, nil, fmt.Errorf("log state is corrupt: stored tree (size %d, root %x) does not match the last signed checkpoint (size %d, root %x)", st.Size, root, c.Size, c.Hash)
	}
	return rng, root, nil
}

// Append adds entry to the log and returns its receipt once the entry and
// a signed checkpoint covering it are durable. Entries over
// log.MaxEntrySize are refused. If the commit fails, Append fails, and so
// does every later Append: the sequencer stops rather than guess what the
// disk holds, and a restart reopens from the last durable state.
func (s *Sequencer) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	return s.append(ctx, entry, nil, log.Fence{})
}

// Expect announces an append that is on its way, such as the entry of a
// tool call whose answer is awaited. A commit under load waits up to
// CommitDelay for announced appends, so that they share it. Append the
// entry with [Expected.Append], or call [Expected.Cancel] if it will not
// come; an announcement left open only costs waits of up to CommitDelay.
func (s *Sequencer) Expect() Pending {
	s.expected.Add(1)
	return &Expected{s: s}
}

// A Pending is an append announced with [Sequencer.Expect]: append it
// or cancel it. It is an alias of an interface literal, so that a user
// (the proxy) can name the very same type without importing this package.
type Pending = interface {
	Append(ctx context.Context, entry []byte) (*log.Receipt, error)
	Cancel()
}

// Expected is the Pending of [Sequencer.Expect].
type Expected struct {
	s    *Sequencer
	done atomic.Bool
}

// Append appends entry as the announced append; see [Sequencer.Append].
func (e *Expected) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	return e.s.append(ctx, entry, e, log.Fence{})
}

// Cancel withdraws the announcement. It is safe to call more than once,
// and after Append.
func (e *Expected) Cancel() {
	if e.done.CompareAndSwap(false, true) && e.s.expected.Add(-1) == 0 {
		e.s.signal()
	}
}

func (s *Sequencer) append(ctx context.Context, entry []byte, ex *Expected, fence log.Fence) (*log.Receipt, error) {
	if ex != nil {
		// Withdrawn once the entry is queued (or will not be), which
		// wakes a commit that waits for nothing else.
		defer ex.Cancel()
	}
	if len(entry) > log.MaxEntrySize {
		return nil, fmt.Errorf("append: entry is %d bytes, over the limit of %d: %w", len(entry), log.MaxEntrySize, log.ErrEntryTooLarge)
	}
	if len(entry) == 0 {
		return nil, errors.New("append: entry is empty")
	}
	req := &request{entry: entry, leafHash: log.LeafHash(entry), fence: fence, reply: make(chan result, 1)}
	s.mu.RLock()
	err := s.failed
	if err == nil {
		err = s.storeErr() // refused before it is queued, let alone forwarded
	}
	if err != nil {
		// Certain to have written nothing, which a caller that keeps
		// state beside the log (the task engine) must know: it may go on
		// once the log resumes.
		err = &refusedError{err}
	}
	if s.closing {
		err = ErrClosed
	}
	if err == nil {
		s.senders.Add(1)
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	defer s.senders.Done() // a panic of the commit it leads included
	lead := s.enqueue(req)
	if ex != nil {
		ex.Cancel()
	}
	// Once queued the entry may be committed whatever ctx says, so wait
	// for the outcome: a caller must never be told "failed" for an entry
	// that is in the log.
	r := s.await(req, lead)
	if r.err != nil {
		return nil, r.err
	}
	rc, err := log.ProveReceipt(ctx, r.nodes, r.index, r.size, req.leafHash, r.cp)
	if err != nil {
		return nil, fmt.Errorf("append: building receipt: %w", err)
	}
	return rc, nil
}

// refusedError is an append refused because the log stopped: nothing was
// written. It matches log.ErrUnavailable, which says so to a caller that
// keeps state beside the log (the task engine goes on once the log
// resumes); its text says that the log stopped, as err does, not that the
// store is unavailable, which reads as passing by itself.
type refusedError struct{ err error }

func (e *refusedError) Error() string   { return "append refused, nothing written: " + e.err.Error() }
func (e *refusedError) Unwrap() []error { return []error{e.err, log.ErrUnavailable} }

// enqueue queues req and reports whether its caller takes the lead (no
// caller leads). A caller that does not waits for its outcome, or for the
// lead, on req.reply.
func (s *Sequencer) enqueue(req *request) (lead bool) {
	s.qmu.Lock()
	s.queue = append(s.queue, req)
	lead = !s.leading
	s.leading = true
	if len(s.queue) == s.maxBatch {
		s.signal() // a full batch ends a commit's wait for announced appends
	}
	s.qmu.Unlock()
	return lead
}

// await returns req's outcome, leading commits when handed the lead; see
// [Sequencer]. The lead is always handed to the oldest request waiting,
// so the batch a leader takes holds its own request.
func (s *Sequencer) await(req *request, lead bool) result {
	for {
		if lead {
			s.lead()
		}
		r := <-req.reply
		if !r.lead {
			return r
		}
		lead = true
	}
}

// lead takes what is waiting, up to MaxBatch, commits it (or resumes the
// log, for a Resume at the head of the queue), and hands the lead on.
func (s *Sequencer) lead() {
	select {
	case <-s.done:
		s.failQueue(ErrClosed)
		return
	default:
	}
	s.awaitExpected()
	s.take()
	// On a panic too, in this order: answer what the commit took, let it
	// go, and only then hand the lead (and s.batch) on.
	defer s.handOn()
	defer s.letGo()
	defer s.stopOnPanic()
	if r := s.batch[0]; r.resume {
		r.reply <- result{err: s.reopen()}
	} else {
		s.last = len(s.batch)
		s.commit(s.batch)
	}
}

// take moves the head of the queue into s.batch: appends up to MaxBatch
// and the first Resume, or that Resume alone.
func (s *Sequencer) take() {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	q, n := s.queue, 1
	if !q[0].resume {
		for n < len(q) && n < s.maxBatch && !q[n].resume {
			n++
		}
	}
	s.batch = append(s.batch[:0], q[:n]...)
	m := copy(q, q[n:])
	clear(q[m:])
	s.queue = q[:m]
}

// letGo drops the last commit's requests, entries and all.
func (s *Sequencer) letGo() {
	clear(s.batch)
	clear(s.drained)
	s.batch, s.drained = s.batch[:0], s.drained[:0]
}

// handOn gives the lead to the oldest request waiting, if any.
func (s *Sequencer) handOn() {
	s.qmu.Lock()
	if len(s.queue) > 0 {
		s.queue[0].reply <- result{lead: true} // never blocks: the oldest has had nothing yet
	} else {
		s.leading = false
	}
	s.qmu.Unlock()
}

// stopOnPanic, deferred, stops the log when a commit panicked (a bug, or
// a store that panics on what it found): every request the commit took
// is answered with the error, as is every later append, and the panic
// goes on up the leading caller's stack. A caller that recovers panics
// (net/http does) so finds a stopped log, not one that waits for ever.
func (s *Sequencer) stopOnPanic() {
	v := recover()
	if v == nil {
		return
	}
	err := fmt.Errorf("log stopped: a commit panicked: %v", v)
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	for _, r := range append(s.batch, s.drained...) {
		select {
		case r.reply <- result{err: err}:
		default: // answered before the panic
		}
	}
	panic(v)
}

// awaitExpected holds a commit under load (the last one carried more than
// one entry) for up to CommitDelay, while announced appends are on their
// way and the batch is not full; see SequencerOptions.CommitDelay.
func (s *Sequencer) awaitExpected() {
	if s.delay <= 0 || s.last <= 1 || s.expected.Load() == 0 {
		return
	}
	if s.timer == nil {
		s.timer = time.NewTimer(s.delay)
	} else {
		s.timer.Reset(s.delay)
	}
	defer s.timer.Stop()
	for s.expected.Load() > 0 {
		s.qmu.Lock()
		full := len(s.queue) >= s.maxBatch
		s.qmu.Unlock()
		if full {
			return
		}
		select {
		case <-s.wake:
		case <-s.timer.C:
			return
		case <-s.done:
			return // the commit under way goes ahead
		}
	}
}

// signal wakes a commit waiting in awaitExpected.
func (s *Sequencer) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// failQueue answers everything waiting with err and leaves the lead; the
// sequencer is closing.
func (s *Sequencer) failQueue(err error) {
	s.qmu.Lock()
	q := s.queue
	s.queue, s.leading = nil, false
	s.qmu.Unlock()
	for _, r := range q {
		r.reply <- result{err: err}
	}
}

// Checkpoint returns the latest signed checkpoint and its size.
func (s *Sequencer) Checkpoint() (size uint64, note []byte) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.size, s.cp
}

// Stats returns the sequencer's counters.
func (s *Sequencer) Stats() Stats {
	s.mu.RLock()
	st := s.stats
	s.mu.RUnlock()
	st.Expected = s.expected.Load()
	return st
}

// Err returns the error that stopped the sequencer, if any: a failed
// commit, or a store that stopped accepting commits on its own
// ([log.Health]: a background write found the disk full, a read met
// corruption, the store is read-only). [log.FaultReason] names the fault.
func (s *Sequencer) Err() error {
	s.mu.RLock()
	err := s.failed
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	return s.storeErr()
}

// storeErr is the store's own failure, if it reports one.
func (s *Sequencer) storeErr() error {
	h, ok := s.store.(log.Health)
	if !ok {
		return nil
	}
	if err := h.Err(); err != nil {
		return fmt.Errorf("log store refuses writes: %w", err)
	}
	return nil
}

// Close stops the sequencer after the commit under way; appends still
// queued fail with ErrClosed. It does not close the store.
func (s *Sequencer) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.mu.Unlock()
	close(s.done)
	s.wg.Wait()
	// Every request queued before is answered: the commit under way
	// completes, and whoever leads next fails the rest (lead).
	s.senders.Wait()
	return nil
}

// commit writes one batch and answers its callers.
func (s *Sequencer) commit(batch []*request) {
	fail := func(err error) {
		s.mu.Lock()
		if s.failed == nil {
			s.failed = fmt.Errorf("log stopped after a failed commit: %w", err)
		}
		err = s.failed
		s.mu.Unlock()
		for _, r := range batch {
			r.reply <- result{err: err}
		}
	}
	if err := s.Err(); err != nil {
		fail(err)
		return
	}
	if s.shared != nil {
		s.commitShared(batch)
		return
	}
	start := s.rng.End()
	// The nodes any inclusion proof in this batch needs are the roots of
	// the compact range before it plus the nodes the batch creates.
	nodes := make(memNodes, 2*len(batch)+len(s.rng.Hashes()))
	before := compact.RangeNodes(0, start, nil)
	for i, h := range s.rng.Hashes() {
		nodes[before[i]] = h
	}
	b := &log.Batch{
		Start:      start,
		Entries:    make([][]byte, len(batch)),
		LeafHashes: make([][]byte, len(batch)),
		Nodes:      make([]log.Node, 0, 2*len(batch)),
	}
	rng := s.rng
	saved := cloneHashes(rng.Hashes())
	visit := func(id compact.NodeID, h []byte) {
		b.Nodes = append(b.Nodes, log.Node{ID: id, Hash: h})
		nodes[id] = h
	}
	for i, r := range batch {
		b.Entries[i] = r.entry
		b.LeafHashes[i] = r.leafHash
		if err := rng.Append(r.leafHash, visit); err != nil {
			fail(err)
			return
		}
	}
	size := rng.End()
	root, err := rng.GetRootHash(nil)
	if err != nil {
		fail(err)
		return
	}
	cp, err := log.SignCheckpoint(log.Checkpoint{Origin: s.signer.Name(), Size: size, Hash: root}, s.signer)
	if err != nil {
		fail(err)
		return
	}
	b.State = log.State{Size: size, Range: cloneHashes(rng.Hashes()), Checkpoint: cp}
	t0 := time.Now()
	err = s.store.Commit(context.Background(), b)
	d := uint64(time.Since(t0))
	if err != nil {
		s.mu.Lock()
		s.stats.CommitErrors++
		s.mu.Unlock()
		// Put the range back so the in-memory tree matches the disk; the
		// sequencer is stopped either way.
		if r, rerr := (&compact.RangeFactory{Hash: log.NodeHash}).NewRange(0, start, saved); rerr == nil {
			s.rng = r
		}
		fail(err)
		return
	}
	if err := s.show(size, cp); err != nil {
		// Committed, but not on record as shown: nobody gets it.
		fail(fmt.Errorf("committing batch [%d, %d): outcome unknown: %w", start, size, err))
		return
	}
	s.mu.Lock()
	s.size, s.cp, s.root = size, cp, root
	s.stats.Appends += uint64(len(batch))
	s.stats.Commits++
	s.stats.CommitNanos += d
	s.mu.Unlock()
	for i, r := range batch {
		r.reply <- result{index: start + uint64(i), size: size, cp: cp, nodes: nodes}
	}
}

// show passes cp, of size, to SequencerOptions.Shown if it is newer than
// the last it was given.
func (s *Sequencer) show(size uint64, cp []byte) error {
	if s.shown == nil {
		return nil
	}
	s.showMu.Lock()
	defer s.showMu.Unlock()
	if size <= s.lastShown {
		return nil
	}
	if err := s.shown(cp); err != nil {
		return fmt.Errorf("recording the checkpoint of size %d before it is shown: %w", size, err)
	}
	s.lastShown = size
	return nil
}

// memNodes serves the nodes of one batch to the proofs of its entries.
type memNodes map[compact.NodeID][]byte

func (m memNodes) ReadNodes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := m[id]
		if !ok {
			return nil, fmt.Errorf("node %d/%d: %w", id.Level, id.Index, log.ErrNotFound)
		}
		out[i] = h
	}
	return out, nil
}

func cloneHashes(h [][]byte) [][]byte {
	out := make([][]byte, len(h))
	copy(out, h)
	return out
}

package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
)

// Many writers. When the store is a [log.SharedStorage] (logpg), other
// sequencers, in other processes, commit to the same log. This sequencer
// then keeps no tree of its own between commits: each commit asks the
// store to lock, builds the batch on the state the store hands it (the
// tree as whoever committed last left it), signs the checkpoint for it
// and commits before the lock is released. The store checks that every
// state it hands out extends the last one this process saw; the sequencer
// checks that its checkpoint is signed by the log's key. The latest
// checkpoint (Checkpoint, the HTTP API) follows other writers' commits as
// the store learns of them.
//
// A commit that fails with log.ErrUnavailable wrote nothing: its appends
// fail, and the sequencer goes on (the database may come back, or take
// writes again). Any other failure stops the sequencer, as with a store of
// one writer, until provlog is restarted: it cannot resume in place
// (Resume), and its error says so (stoppedShared).

// stoppedShared begins the error of a sequencer on a shared store that
// stopped: what the agent's refused calls and the operator's health
// report say, before what stopped it.
const stoppedShared = "log stopped; restart provlog once what follows is fixed (on start it checks the log in the database)"

// GenesisKey fences the genesis entry, so that of sidecars opening an
// empty shared log at once, one writes it: its fence key row names entry
// 0.
const GenesisKey = "provlog/genesis"

// openShared notes whether the store has other writers, and follows them.
func (s *Sequencer) openShared() {
	sh, ok := s.store.(log.SharedStorage)
	if !ok {
		return
	}
	s.shared = sh
	sh.Follow(s.adopt)
}

// adopt makes a state the store learnt of the latest checkpoint, if it is
// newer and signed by the log's key. A state signed otherwise stops the
// sequencer: another log's writer is using this store.
func (s *Sequencer) adopt(st log.State) {
	err := s.checkSigned(st)
	if err == nil {
		err = s.show(st.Size, st.Checkpoint) // before it is served as the latest
	}
	if err != nil {
		s.mu.Lock()
		if s.failed == nil {
			s.failed = fmt.Errorf(stoppedShared+": %w", err)
		}
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Size > s.size {
		s.size, s.cp = st.Size, st.Checkpoint
	}
}

// checkSigned checks that st's checkpoint is signed by the log's key and
// names st's tree.
func (s *Sequencer) checkSigned(st log.State) error {
	if st.Size == 0 {
		return nil
	}
	rng, err := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, st.Size, cloneHashes(st.Range))
	if err != nil {
		return fmt.Errorf("the stored state of size %d is corrupt: %w", st.Size, err)
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return err
	}
	c, _, err := log.OpenCheckpoint(st.Checkpoint, s.verifier)
	if err != nil {
		return fmt.Errorf("the stored checkpoint of size %d is not signed by this log's key (%s): %w", st.Size, s.verifier.Name(), err)
	}
	if c.Size != st.Size || !bytes.Equal(c.Hash, root) {
		return fmt.Errorf("the stored checkpoint (size %d) does not match the stored tree (size %d)", c.Size, st.Size)
	}
	return nil
}

// AppendFenced appends entry as Append does, but only if no entry under
// any of fence's keys was committed at or after fence.After by any writer; if one
// was, it fails with an error wrapping log.ErrFenced and writes nothing.
// With a store of one writer there is no other writer to fence off, and
// AppendFenced is Append.
func (s *Sequencer) AppendFenced(ctx context.Context, entry []byte, fence log.Fence) (*log.Receipt, error) {
	return s.append(ctx, entry, nil, fence)
}

// unavailableCommit is a commit to a shared store that failed writing
// nothing (log.ErrUnavailable), and when.
type unavailableCommit struct {
	err error
	at  time.Time
}

// diskFullHold is how long, after a commit refused for want of space
// (log.ErrDiskFull), Unavailable keeps saying so without trying the store.
//
// A commit that writes nothing, Unavailable's probe otherwise, passes on
// a full disk, so it would say all is well between calls that are all
// refused. A small real write proves no more: PostgreSQL's WAL segments
// are allocated ahead and a heap page may have room, so a probe's row can
// pass where an entry's rows fail. So the last real commit's outcome
// stands: until a commit goes through, or, with none tried, for
// diskFullHold; after that the probe decides again (it says ok, and the
// next call tries for real), so that a sidecar whose space was freed
// while a load balancer kept its calls away is not left out for good.
const diskFullHold = 30 * time.Second

// Unavailable returns the error of the last commit if it failed with
// log.ErrUnavailable (nothing written; the next commit may succeed: the
// store could not be reached, or took no writes), or nil. While it is
// set, each call tries the store again (for at most a second) with a
// commit that writes nothing, so that it clears when commits would go
// through, even if no append came since; a read would pass on a database
// that is read-only. A disk full is not seen so (see diskFullHold).
func (s *Sequencer) Unavailable() error {
	p := s.unavailable.Load()
	if p == nil {
		return nil
	}
	if errors.Is(p.err, log.ErrDiskFull) && time.Since(p.at) < diskFullHold {
		return p.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.shared.CommitShared(ctx, nil, func(log.State, []bool) (*log.Batch, error) { return nil, nil })
	if err == nil {
		s.unavailable.CompareAndSwap(p, nil)
		return nil
	}
	if errors.Is(err, log.ErrUnavailable) && s.unavailable.CompareAndSwap(p, &unavailableCommit{err, p.at}) {
		return err // what stands in the way now
	}
	return p.err
}

// CatchUp returns the latest checkpoint and its size, as Checkpoint does;
// but on a shared log, when the latest here is below size, it first asks
// the store for the newest state, which it adopts as it adopts every
// other writer's commit (shown first). A client holding a checkpoint
// another sidecar handed out can so read its tree here before this
// sidecar hears of the commit. One question is asked at a time, and
// callers that waited for one begun after they came take its answer: a
// flood of requests for sizes the log does not have asks the store no
// more often than it answers. A question that fails leaves the latest as
// it was.
func (s *Sequencer) CatchUp(ctx context.Context, size uint64) (uint64, []byte) {
	cur, cp := s.Checkpoint()
	if cur >= size || s.shared == nil {
		return cur, cp
	}
	begun := s.asked.Load()
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if s.asked.Load() == begun {
		s.asked.Add(1)
		s.shared.Latest(ctx) // reaches adopt through Follow
	}
	return s.Checkpoint()
}

// Shared reports whether other writers commit to the same log.
func (s *Sequencer) Shared() bool { return s.shared != nil }

// appendGenesis appends the genesis entry, unless another writer of a
// shared log has.
func (s *Sequencer) appendGenesis(ctx context.Context, g []byte) (*log.Receipt, error) {
	if s.shared == nil {
		return s.Append(ctx, g)
	}
	r, err := s.AppendFenced(ctx, g, log.Fence{Key: GenesisKey})
	if errors.Is(err, log.ErrFenced) {
		return nil, nil
	}
	return r, err
}

// commitShared commits one batch to a shared store; see above.
func (s *Sequencer) commitShared(batch []*request) {
	var fences []log.Fence
	for i, r := range batch {
		if r.fence.Fenced() && fences == nil {
			fences = make([]log.Fence, len(batch))
		}
		if fences != nil {
			fences[i] = r.fence
		}
	}
	var (
		kept   []*request
		extra  []*request // appends that arrived while waiting for the lock
		nodes  memNodes
		start  uint64
		cp     []byte
		size   uint64
		signed uint64 // the size whose checkpoint was last checked
	)
	s.mu.RLock()
	signed = s.size
	s.mu.RUnlock()
	t0 := time.Now()
	err := s.shared.CommitShared(context.Background(), fences, func(st log.State, fenced []bool) (*log.Batch, error) {
		if st.Size != signed {
			if err := s.checkSigned(st); err != nil {
				return nil, err
			}
		}
		kept = kept[:0]
		for i, r := range batch {
			if i >= len(fenced) || !fenced[i] {
				kept = append(kept, r)
			}
		}
		// build may be called again, on a newer state: what an earlier
		// call drained stays in the batch. A batch with fences drains
		// nothing: the store takes one fence per append it commits,
		// given before build, and refuses a batch of more entries
		// (which stopped the log under tasks and calls at once).
		if fences == nil {
			extra = append(extra, s.drainUnfenced(len(batch)+len(extra))...)
		}
		kept = append(kept, extra...)
		if len(kept) == 0 {
			return nil, nil
		}
		b, n, err := s.buildOn(st, kept)
		if err != nil {
			return nil, err
		}
		nodes, start, size, cp = n, b.Start, b.State.Size, b.State.Checkpoint
		return b, nil
	})
	d := uint64(time.Since(t0))
	all := append(batch[:len(batch):len(batch)], extra...)
	if err != nil && errors.Is(err, log.ErrUnavailable) {
		s.unavailable.Store(&unavailableCommit{err, time.Now()})
	} else {
		s.unavailable.Store(nil)
	}
	if err != nil {
		s.failShared(all, err, stoppedShared+": a commit failed: %w", true)
		return
	}
	// Only the last build's batch is committed (the store may build again,
	// on a newer state or the fences as they stand). If it kept nothing
	// (every append fenced off), nothing was committed: what an earlier
	// build signed is not served or shown, and the checkpoint stays.
	if len(kept) > 0 {
		if err := s.show(size, cp); err != nil {
			// Committed, but not on record as shown: nobody gets it.
			s.failShared(all, err, stoppedShared+": a commit went through, but could not be recorded as handed out (nobody was answered on it): %w", false)
			return
		}
		s.mu.Lock()
		if size > s.size {
			s.size, s.cp = size, cp
		}
		s.stats.Appends += uint64(len(kept))
		s.stats.Commits++
		s.stats.CommitNanos += d
		s.mu.Unlock()
	}
	k := 0
	for _, r := range all {
		if k < len(kept) && kept[k] == r {
			r.reply <- result{index: start + uint64(k), size: size, cp: cp, nodes: nodes}
			k++
			continue
		}
		r.reply <- result{err: fmt.Errorf("append: %w (keys %q, decided at size %d)", log.ErrFenced, r.fence.Keys(), r.fence.After)}
	}
}

// failShared answers all with err: the sequencer stops (format wraps
// err) unless the store is only unavailable; failedCommit counts the
// commit among the failed ones.
func (s *Sequencer) failShared(all []*request, err error, format string, failedCommit bool) {
	s.mu.Lock()
	if failedCommit {
		s.stats.CommitErrors++
	}
	if !errors.Is(err, log.ErrUnavailable) && s.failed == nil {
		s.failed = fmt.Errorf(format, err)
	}
	if s.failed != nil {
		err = s.failed
	}
	s.mu.Unlock()
	for _, r := range all {
		r.reply <- result{err: err}
	}
}

// drainUnfenced takes the appends queued while this sequencer waited for
// the store's lock, so that they share the commit, up to MaxBatch with the
// n already taken. Fenced appends cannot join (their fences were checked
// with the lock taken) and stay queued for the next commit, as does a
// Resume and whatever queued after it.
func (s *Sequencer) drainUnfenced(n int) []*request {
	var more []*request
	defer func() { s.drained = append(s.drained, more...) }()
	s.qmu.Lock()
	defer s.qmu.Unlock()
	q, k := s.queue, 0
	for i, r := range q {
		if r.resume || n+len(more) >= s.maxBatch {
			k += copy(q[k:], q[i:])
			break
		}
		if r.fence.Fenced() {
			q[k] = r
			k++
			continue
		}
		more = append(more, r)
	}
	clear(q[k:])
	s.queue = q[:k]
	return more
}

// buildOn builds the batch appending reqs to the tree of st, signs its
// checkpoint, and returns it with the nodes its entries' proofs need.
func (s *Sequencer) buildOn(st log.State, reqs []*request) (*log.Batch, memNodes, error) {
	rng, err := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, st.Size, cloneHashes(st.Range))
	if err != nil {
		return nil, nil, fmt.Errorf("the stored state of size %d is corrupt: %w", st.Size, err)
	}
	nodes := make(memNodes, 2*len(reqs)+len(st.Range))
	for i, id := range compact.RangeNodes(0, st.Size, nil) {
		nodes[id] = st.Range[i]
	}
	b := &log.Batch{
		Start:      st.Size,
		Entries:    make([][]byte, len(reqs)),
		LeafHashes: make([][]byte, len(reqs)),
		Nodes:      make([]log.Node, 0, 2*len(reqs)),
	}
	visit := func(id compact.NodeID, h []byte) {
		b.Nodes = append(b.Nodes, log.Node{ID: id, Hash: h})
		nodes[id] = h
	}
	for i, r := range reqs {
		b.Entries[i], b.LeafHashes[i] = r.entry, r.leafHash
		if err := rng.Append(r.leafHash, visit); err != nil {
			return nil, nil, err
		}
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return nil, nil, err
	}
	cp, err := log.SignCheckpoint(log.Checkpoint{Origin: s.signer.Name(), Size: rng.End(), Hash: root}, s.signer)
	if err != nil {
		return nil, nil, err
	}
	b.State = log.State{Size: rng.End(), Range: cloneHashes(rng.Hashes()), Checkpoint: cp}
	return b, nodes, nil
}

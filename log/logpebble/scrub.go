package logpebble

// The background scrub: a store opened with Options.ScrubInterval reads a
// bounded slice of itself every interval, in key order, wrapping around at
// the end, so that a corrupt block that nothing reads (startup reads only
// the state, the last entry and the upper levels of the tree) is found
// within a pass, without waiting for a write or a proof to meet it. What a
// slice meets is what Verify would meet: corruption or an I/O error fails
// the store (Err), and /healthz and /metrics say so. Blocks come through
// Pebble's block cache, so a block already cached is not read from the
// disk again; a scrub slice also costs the cache what it displaces, which
// is why slices are small.

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultScrubBytes is how much a scrub slice reads when
// Options.ScrubBytes is 0.
const DefaultScrubBytes = 1 << 20

// ScrubStatus says how far the background scrub has come since the store
// opened.
type ScrubStatus struct {
	Interval    time.Duration // between slices; 0 if the store does not scrub
	SliceBytes  uint64        // bytes a slice reads
	Passes      uint64        // complete passes over the store
	PassBytes   uint64        // bytes read in the pass under way
	Bytes       uint64        // bytes read in all
	LastPass    time.Time     // when the last complete pass ended (zero: none yet)
	LastError   string        // the last error a slice met ("" if none)
	LastErrorAt time.Time
}

// scrubber runs a store's background scrub.
type scrubber struct {
	interval time.Duration
	slice    uint64
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when the scrub goroutine returns

	mu     sync.Mutex
	next   []byte // where the next slice starts (nil: at the start)
	logged string // the error last logged, until a slice is read whole
	status ScrubStatus
}

// startScrub starts the background scrub of s, if o asks for one.
func (s *Store) startScrub(o *Options) {
	if o.ScrubInterval <= 0 {
		return
	}
	sc := &scrubber{interval: o.ScrubInterval, slice: o.ScrubBytes, stop: make(chan struct{}), done: make(chan struct{})}
	if sc.slice == 0 {
		sc.slice = DefaultScrubBytes
	}
	sc.status.Interval, sc.status.SliceBytes = sc.interval, sc.slice
	s.scrub = sc
	go s.runScrub(sc)
}

func (s *Store) runScrub(sc *scrubber) {
	defer close(sc.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-sc.stop
		cancel()
	}()
	t := time.NewTicker(sc.interval)
	defer t.Stop()
	for {
		select {
		case <-sc.stop:
			return
		case <-t.C:
		}
		if err := s.scrubSlice(ctx, sc); errors.Is(err, errClosed) || ctx.Err() != nil {
			return
		}
	}
}

// scrubSlice reads the next slice of the store and records what it found.
func (s *Store) scrubSlice(ctx context.Context, sc *scrubber) error {
	if _, err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.calls.Done()
	sc.mu.Lock()
	from := sc.next
	sc.mu.Unlock()
	var rep VerifyReport
	next, err := s.scan(ctx, from, sc.slice, &rep)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := &sc.status
	st.Bytes += rep.Bytes
	st.PassBytes += rep.Bytes
	if err != nil {
		if ctx.Err() == nil {
			// Said once while it lasts: the slice is read again every
			// interval, and finds the same damage each time.
			if msg := err.Error(); msg != sc.logged {
				s.errorf("logpebble: scrub: %v", err)
				sc.logged = msg
			}
			st.LastError, st.LastErrorAt = err.Error(), time.Now()
		}
		return err // the slice is read again next time
	}
	sc.next, sc.logged = next, ""
	if next == nil {
		st.Passes++
		st.PassBytes = 0
		st.LastPass = time.Now()
	}
	return nil
}

// stopScrub stops the background scrub and waits for it.
func (s *Store) stopScrub() {
	if s.scrub != nil {
		close(s.scrub.stop)
		<-s.scrub.done
	}
}

// ScrubStatus reports the background scrub's progress (the zero
// ScrubStatus if the store does not scrub).
func (s *Store) ScrubStatus() ScrubStatus {
	if s.scrub == nil {
		return ScrubStatus{}
	}
	s.scrub.mu.Lock()
	defer s.scrub.mu.Unlock()
	return s.scrub.status
}

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

// Defaults for [CosignerOptions].
const (
	DefaultInterval   = 250 * time.Millisecond
	DefaultTimeout    = 10 * time.Second
	DefaultMaxBackoff = time.Minute
)

// CosignerOptions configure a [Cosigner].
type CosignerOptions struct {
	// Log verifies the log's checkpoints; required.
	Log note.Verifier
	// Witnesses are the witnesses asked in every round.
	Witnesses []*Witness
	// Threshold is how many of them must cosign a checkpoint before it
	// becomes [Cosigner.Latest]: 1 to len(Witnesses).
	Threshold int
	// Initial, if not nil, is a cosigned checkpoint from an earlier run
	// (as OnCosigned got it). It becomes Latest if it still meets the
	// policy.
	Initial []byte
	// Interval is the least time between two checkpoints put to the
	// witnesses, so that a busy log's checkpoints are coalesced
	// (DefaultInterval).
	Interval time.Duration
	// Timeout bounds each witness's answer (DefaultTimeout). A witness
	// that takes long holds up only itself: its cosignature, when it
	// comes, is added to the checkpoint if that is still the latest.
	Timeout time.Duration
	// MaxBackoff bounds the wait before a witness that failed is asked
	// again (DefaultMaxBackoff); the wait starts at a second and doubles.
	MaxBackoff time.Duration
	// OnCosigned, if not nil, is called with each new Latest (to keep it
	// across restarts): one call at a time, in order, from a goroutine of
	// Run's.
	OnCosigned func(cosigned []byte)
	// OnConflict, if not nil, is called once for each distinct conflict a
	// witness reports, with the checkpoint it refused, from the goroutine
	// of Run's that asks that witness (calls for two witnesses may
	// overlap). The sidecar records it as a witness.conflict entry.
	OnConflict func(c *ConflictError, checkpoint []byte)
	// Logger gets failures and conflicts; nil means none.
	Logger *slog.Logger
}

// A Cosigner collects cosignatures for a log's checkpoints from a set of
// witnesses under a k-of-n policy. Submit hands it new checkpoints; Run
// does the work; Latest returns the newest checkpoint the policy accepts.
type Cosigner struct {
	opts   CosignerOptions
	policy log.WitnessPolicy
	logger *slog.Logger
	kick   chan struct{}

	wake   []chan struct{} // per witness: the target changed
	keepMu sync.Mutex      // held by keep: one OnCosigned at a time, in order

	mu       sync.Mutex
	pending  []byte // newest submitted checkpoint not yet tried
	pendingN uint64
	target   []byte        // the checkpoint the witnesses are asked to cosign
	cosigned []cosignature // per witness: what it last cosigned
	latest   []byte        // newest cosigned checkpoint meeting the policy
	latestN  uint64
	latestAt time.Time
	// submittedN is the newest size submitted; waitingSince is when a
	// checkpoint newer than the latest began to wait (zero: none waits).
	submittedN   uint64
	waitingSince time.Time
	status       []WitnessStatus
	conflicts    map[string]bool
	// perWitness counts the conflicts reported of each witness.
	perWitness map[string]int
}

// WitnessStatus is what a Cosigner knows about one witness.
type WitnessStatus struct {
	Name        string    `json:"name"`
	Size        uint64    `json:"size"` // the size it last cosigned
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	Conflict    string    `json:"conflict,omitempty"` // the last conflict it reported, until it next cosigns
}

// Status is a Cosigner's state, for provlog__status and /healthz.
type Status struct {
	Threshold    int       `json:"threshold"`
	CosignedSize uint64    `json:"cosigned_size"`
	CosignedAt   time.Time `json:"cosigned_at,omitzero"`
	// WaitingSince is when a checkpoint newer than the cosigned one began
	// to wait for its cosignatures (zero: none waits).
	WaitingSince time.Time       `json:"waiting_since,omitzero"`
	Witnesses    []WitnessStatus `json:"witnesses"`
}

// NewCosigner checks the options and returns a Cosigner; call Run.
func NewCosigner(opts CosignerOptions) (*Cosigner, error) {
	if opts.Log == nil {
		return nil, errors.New("cosigner: the log's verifier is required")
	}
	vs := make([]note.Verifier, len(opts.Witnesses))
	for i, w := range opts.Witnesses {
		vs[i] = w.v
	}
	p := log.WitnessPolicy{Witnesses: vs, Threshold: opts.Threshold}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("cosigner: %w", err)
	}
	if opts.Threshold < 1 {
		return nil, errors.New("cosigner: the threshold must be at least 1")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	c := &Cosigner{
		opts:       opts,
		policy:     p,
		logger:     opts.Logger,
		kick:       make(chan struct{}, 1),
		conflicts:  map[string]bool{},
		perWitness: map[string]int{},
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	for _, w := range opts.Witnesses {
		c.status = append(c.status, WitnessStatus{Name: w.Name()})
		c.wake = append(c.wake, make(chan struct{}, 1))
	}
	c.cosigned = make([]cosignature, len(opts.Witnesses))
	if opts.Initial != nil {
		if cp, _, err := log.OpenWitnessedCheckpoint(opts.Initial, opts.Log, p); err != nil {
			c.logger.Warn("the saved cosigned checkpoint does not meet the witness policy; ignoring it", "err", err)
		} else {
			c.latest, c.latestN = bytes.Clone(opts.Initial), cp.Size
		}
	}
	return c, nil
}

// Submit hands the Cosigner a new signed checkpoint of the log. It never
// blocks; checkpoints submitted faster than the interval are coalesced
// into the newest, and ones no larger than a checkpoint already submitted
// are dropped.
func (c *Cosigner) Submit(signed []byte) {
	cp, err := log.ParseCheckpointNote(signed)
	if err != nil {
		c.logger.Error("cosigner: submitted checkpoint is malformed", "err", err)
		return
	}
	c.mu.Lock()
	if cp.Size > c.pendingN {
		c.pending, c.pendingN = bytes.Clone(signed), cp.Size
	}
	c.submittedN = max(c.submittedN, cp.Size)
	if cp.Size > c.latestN && c.waitingSince.IsZero() {
		c.waitingSince = time.Now()
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Due is how long a submitted checkpoint may wait for its cosignatures
// before they are overdue: the interval that may hold it back, and the
// timeout within which each witness answers.
func (c *Cosigner) Due() time.Duration { return c.opts.Interval + c.opts.Timeout }

// Latest returns the newest checkpoint at least Threshold witnesses
// cosigned, with their cosignatures, or nil if there is none yet.
func (c *Cosigner) Latest() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

// Status returns the Cosigner's state.
func (c *Cosigner) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{
		Threshold:    c.opts.Threshold,
		CosignedSize: c.latestN,
		CosignedAt:   c.latestAt,
		WaitingSince: c.waitingSince,
		Witnesses:    append([]WitnessStatus(nil), c.status...),
	}
}

// Run asks the witnesses to cosign the submitted checkpoints until ctx is
// done, then returns nil. Each witness is asked by a goroutine of its own,
// one request at a time, so that a witness that hangs or fails holds up
// nothing but itself: a checkpoint becomes Latest as soon as Threshold
// witnesses cosigned it, and a cosignature that comes later is added to
// it while it is still the latest.
func (c *Cosigner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range c.opts.Witnesses {
		wg.Go(func() { c.follow(ctx, i) })
	}
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		}
		if wait := c.opts.Interval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		c.mu.Lock()
		cp := c.pending
		c.pending = nil
		if cp != nil {
			c.target = cp
		}
		c.mu.Unlock()
		if cp == nil {
			continue
		}
		last = time.Now()
		for _, w := range c.wake {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
}

// follow asks witness i to cosign the newest checkpoint (the target) each
// time it changes, within Timeout, and after a failure worth retrying asks
// again after a backoff, whether or not a newer one came.
func (c *Cosigner) follow(ctx context.Context, i int) {
	var (
		tried   []byte
		backoff time.Duration
		retry   *time.Timer
	)
	for {
		if retry == nil {
			select {
			case <-ctx.Done():
				return
			case <-c.wake[i]:
			}
		} else {
			select {
			case <-ctx.Done():
				retry.Stop()
				return
			case <-retry.C:
				retry = nil
			}
		}
		c.mu.Lock()
		cp := c.target
		c.mu.Unlock()
		if cp == nil || (backoff == 0 && bytes.Equal(cp, tried)) {
			continue
		}
		tried = cp
		wctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		sigs, err := c.opts.Witnesses[i].Cosign(wctx, cp)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !c.answer(i, cp, cosignResult{sigs, err}, time.Now()) {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, time.Second), c.opts.MaxBackoff)
		retry = time.NewTimer(backoff)
	}
}

// A cosignResult is one witness's answer.
type cosignResult struct {
	sigs []byte
	err  error
}

// answer records witness i's answer to cp and, once Threshold witnesses
// have cosigned cp (or cp is the latest already), keeps cp with every
// cosignature of it the witnesses gave. It reports whether the witness
// should be asked again for a reason worth retrying.
func (c *Cosigner) answer(i int, cp []byte, r cosignResult, now time.Time) (retry bool) {
	if c.tally(i, cp, r, now) {
		return true
	}
	if r.err != nil {
		return false
	}
	c.mu.Lock()
	c.cosigned[i] = cosignature{cp, r.sigs}
	var sigs [][]byte
	for _, s := range c.cosigned {
		if bytes.Equal(s.cp, cp) {
			sigs = append(sigs, s.sigs)
		}
	}
	latest := bytes.HasPrefix(c.latest, cp)
	c.mu.Unlock()
	if len(sigs) < c.opts.Threshold && !latest {
		return false
	}
	if err := c.keep(cp, sigs, now); err != nil {
		// The witness answered, but nothing it cosigned is held: it
		// counts as failing, or the sidecar's health would say the policy
		// is met while no receipt carries a cosignature.
		c.mu.Lock()
		c.status[i].LastError = "its cosignature could not be kept: " + err.Error()
		c.mu.Unlock()
		return true
	}
	return false
}

// A cosignature is the checkpoint a witness last cosigned, and its lines.
type cosignature struct {
	cp, sigs []byte
}

// maxConflictsPerWitness bounds the witness.conflict entries one witness
// can cause in a run. The witness chooses the size a conflict names, so a
// hostile one answering each round with a new size made one signed,
// synced entry a round (each entry a new checkpoint, and so a new round)
// for as long as it liked. A few keep the evidence of a real fork.
const maxConflictsPerWitness = 4

// tally records witness i's answer to cp in its status, reports a
// conflict not seen before (to the log and OnConflict) and a failure, and
// returns whether the witness failed for a reason worth retrying.
func (c *Cosigner) tally(i int, cp []byte, r cosignResult, now time.Time) (retry bool) {
	var (
		ce    *ConflictError
		be    *BehindError
		fresh bool
	)
	c.mu.Lock()
	st := &c.status[i]
	st.Size = c.opts.Witnesses[i].Size()
	switch {
	case r.err == nil:
		// A witness that cosigns our checkpoint holds our history now,
		// whatever it reported before.
		st.LastSuccess, st.LastError, st.Conflict = now, "", ""
	case errors.As(r.err, &be):
		// The witness is ahead on the log's own tree: neither a failure
		// nor a conflict. The next checkpoint is asked for from its size.
		c.mu.Unlock()
		c.logger.Info("witness is ahead of a stale checkpoint", "witness", be.Witness, "witness_size", be.WitnessSize, "size", be.Size)
		return false
	case errors.As(r.err, &ce):
		st.LastError, st.Conflict = r.err.Error(), r.err.Error()
		key := fmt.Sprintf("%s %d %d", ce.Witness, ce.Status, ce.WitnessSize)
		switch n := c.perWitness[ce.Witness]; {
		case c.conflicts[key]:
		case n < maxConflictsPerWitness:
			c.conflicts[key] = true
			c.perWitness[ce.Witness] = n + 1
			fresh = true
		case n == maxConflictsPerWitness:
			c.perWitness[ce.Witness] = n + 1
			c.logger.Warn("witness keeps reporting new conflicts; no more are recorded in the log until restart", "witness", ce.Witness, "recorded", n)
		}
	default:
		st.LastError = r.err.Error()
		retry = true
	}
	c.mu.Unlock()

	switch {
	case fresh:
		c.logger.Error("witness conflict", "witness", ce.Witness, "status", ce.Status, "witness_size", ce.WitnessSize, "size", ce.Size, "detail", ce.Detail)
		if c.opts.OnConflict != nil {
			c.opts.OnConflict(ce, cp)
		}
	case retry:
		c.logger.Warn("witness failed", "witness", c.opts.Witnesses[i].Name(), "err", r.err)
	}
	return retry
}

// keep merges sigs into cp, or into the latest if it is cp with
// cosignatures, and if the result meets the policy, is no older than the
// latest and adds to it, makes it the latest and passes it to OnCosigned.
// It returns the error when the merge or the policy failed.
func (c *Cosigner) keep(cp []byte, sigs [][]byte, now time.Time) error {
	c.keepMu.Lock()
	defer c.keepMu.Unlock()
	c.mu.Lock()
	base, latest := cp, c.latest
	if bytes.HasPrefix(latest, cp) {
		base = latest
	}
	c.mu.Unlock()
	merged, err := witness.AddCosignatures(base, sigs...)
	if err != nil {
		c.logger.Error("cosigner: merging cosignatures", "err", err)
		return err
	}
	if bytes.Equal(merged, latest) {
		return nil // nothing new
	}
	got, _, err := log.OpenWitnessedCheckpoint(merged, c.opts.Log, c.policy)
	if err != nil {
		c.logger.Error("cosigner: the cosigned checkpoint does not meet the policy", "err", err)
		return err
	}
	c.mu.Lock()
	newer := got.Size >= c.latestN
	if newer {
		c.latest, c.latestN, c.latestAt = merged, got.Size, now
		// A newer checkpoint still waiting waits from now at the
		// earliest: its round began after this one.
		c.waitingSince = time.Time{}
		if c.submittedN > c.latestN {
			c.waitingSince = now
		}
	}
	c.mu.Unlock()
	if newer && c.opts.OnCosigned != nil {
		c.opts.OnCosigned(merged)
	}
	return nil
}

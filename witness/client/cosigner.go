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
	// Interval is the least time between the starts of two rounds, so
	// that a busy log's checkpoints are coalesced (DefaultInterval).
	Interval time.Duration
	// Timeout bounds each witness's answer in a round (DefaultTimeout).
	Timeout time.Duration
	// MaxBackoff bounds the wait before a round is retried after a witness
	// failed and no newer checkpoint came (DefaultMaxBackoff).
	MaxBackoff time.Duration
	// OnCosigned, if not nil, is called with each new Latest, from the
	// Run goroutine (to keep it across restarts).
	OnCosigned func(cosigned []byte)
	// OnConflict, if not nil, is called once for each distinct conflict a
	// witness reports, with the checkpoint it refused, from the Run
	// goroutine. The sidecar records it as a witness.conflict entry.
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

	mu        sync.Mutex
	pending   []byte // newest submitted checkpoint not yet tried
	pendingN  uint64
	latest    []byte // newest cosigned checkpoint meeting the policy
	latestN   uint64
	latestAt  time.Time
	status    []WitnessStatus
	conflicts map[string]bool
	// perWitness counts the conflicts reported of each witness.
	perWitness map[string]int
}

// WitnessStatus is what a Cosigner knows about one witness.
type WitnessStatus struct {
	Name        string    `json:"name"`
	Size        uint64    `json:"size"` // the size it last cosigned
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	Conflict    string    `json:"conflict,omitempty"` // the last conflict it reported
}

// Status is a Cosigner's state, for provlog__status and /healthz.
type Status struct {
	Threshold    int             `json:"threshold"`
	CosignedSize uint64          `json:"cosigned_size"`
	CosignedAt   time.Time       `json:"cosigned_at,omitzero"`
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
	}
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
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

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
		Witnesses:    append([]WitnessStatus(nil), c.status...),
	}
}

// Run runs rounds until ctx is done, then returns nil.
func (c *Cosigner) Run(ctx context.Context) error {
	var (
		last     time.Time
		retry    []byte // checkpoint to retry after a failed round, if no newer one comes
		backoff  time.Duration
		retryAt  <-chan time.Time
		timerRun *time.Timer
	)
	defer func() {
		if timerRun != nil {
			timerRun.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-retryAt:
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
		c.mu.Unlock()
		if cp == nil {
			cp = retry
		}
		if cp == nil {
			continue
		}
		last = time.Now()
		if c.round(ctx, cp) {
			retry, backoff, retryAt = nil, 0, nil
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		retry = cp
		backoff = min(max(2*backoff, time.Second), c.opts.MaxBackoff)
		if timerRun != nil {
			timerRun.Stop()
		}
		timerRun = time.NewTimer(backoff)
		retryAt = timerRun.C
	}
}

// round asks every witness to cosign cp and reports whether none of them
// failed for a reason worth retrying.
func (c *Cosigner) round(ctx context.Context, cp []byte) bool {
	res := c.ask(ctx, cp)
	now := time.Now()
	sigs, ok := c.tally(cp, res, now)
	if len(sigs) < c.opts.Threshold {
		return ok
	}
	return c.keep(cp, sigs, now) && ok
}

// A cosignResult is one witness's answer in a round.
type cosignResult struct {
	sigs []byte
	err  error
}

// ask asks every witness to cosign cp, all at once, each within Timeout.
func (c *Cosigner) ask(ctx context.Context, cp []byte) []cosignResult {
	res := make([]cosignResult, len(c.opts.Witnesses))
	var wg sync.WaitGroup
	for i, w := range c.opts.Witnesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
			defer cancel()
			res[i].sigs, res[i].err = w.Cosign(wctx, cp)
		}()
	}
	wg.Wait()
	return res
}

// maxConflictsPerWitness bounds the witness.conflict entries one witness
// can cause in a run. The witness chooses the size a conflict names, so a
// hostile one answering each round with a new size made one signed,
// synced entry a round (each entry a new checkpoint, and so a new round)
// for as long as it liked. A few keep the evidence of a real fork.
const maxConflictsPerWitness = 4

// tally records the round's answers in the witnesses' status, reports a
// conflict not seen before (to the log and OnConflict) and a failure, and
// returns the cosignatures and whether no witness failed for a reason
// worth retrying.
func (c *Cosigner) tally(cp []byte, res []cosignResult, now time.Time) (sigs [][]byte, ok bool) {
	ok = true
	var conflicts []*ConflictError
	c.mu.Lock()
	for i, r := range res {
		st := &c.status[i]
		st.Size = c.opts.Witnesses[i].Size()
		var ce *ConflictError
		switch {
		case r.err == nil:
			sigs = append(sigs, r.sigs)
			st.LastSuccess, st.LastError = now, ""
		case errors.As(r.err, &ce):
			st.LastError, st.Conflict = r.err.Error(), r.err.Error()
			key := fmt.Sprintf("%s %d %d", ce.Witness, ce.Status, ce.WitnessSize)
			switch n := c.perWitness[ce.Witness]; {
			case c.conflicts[key]:
			case n < maxConflictsPerWitness:
				c.conflicts[key] = true
				c.perWitness[ce.Witness] = n + 1
				conflicts = append(conflicts, ce)
			case n == maxConflictsPerWitness:
				c.perWitness[ce.Witness] = n + 1
				c.logger.Warn("witness keeps reporting new conflicts; no more are recorded in the log until restart", "witness", ce.Witness, "recorded", n)
			}
		default:
			st.LastError = r.err.Error()
			ok = false
		}
	}
	c.mu.Unlock()

	for _, ce := range conflicts {
		c.logger.Error("witness conflict", "witness", ce.Witness, "status", ce.Status, "witness_size", ce.WitnessSize, "size", ce.Size, "detail", ce.Detail)
		if c.opts.OnConflict != nil {
			c.opts.OnConflict(ce, cp)
		}
	}
	for i, r := range res {
		if r.err != nil && !errors.As(r.err, new(*ConflictError)) {
			c.logger.Warn("witness failed", "witness", c.opts.Witnesses[i].Name(), "err", r.err)
		}
	}
	return sigs, ok
}

// keep merges sigs into cp and, if the result meets the policy and is no
// older than the latest, makes it the latest and passes it to OnCosigned.
// It reports false when the merge or the policy failed.
func (c *Cosigner) keep(cp []byte, sigs [][]byte, now time.Time) bool {
	merged, err := witness.AddCosignatures(cp, sigs...)
	if err != nil {
		c.logger.Error("cosigner: merging cosignatures", "err", err)
		return false
	}
	got, _, err := log.OpenWitnessedCheckpoint(merged, c.opts.Log, c.policy)
	if err != nil {
		c.logger.Error("cosigner: the cosigned checkpoint does not meet the policy", "err", err)
		return false
	}
	c.mu.Lock()
	newer := got.Size >= c.latestN
	if newer {
		c.latest, c.latestN, c.latestAt = merged, got.Size, now
	}
	c.mu.Unlock()
	if newer && c.opts.OnCosigned != nil {
		c.opts.OnCosigned(merged)
	}
	return true
}

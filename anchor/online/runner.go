package online

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/provlog/provlog/anchor"

	"github.com/provlog/provlog/anchor/rekor"
	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// Log is the log as the runner sees it: its latest signed checkpoint, and
// a way to append the anchor entry. A *server.Sequencer is one.
type Log interface {
	Checkpoint() (size uint64, note []byte)
	Append(ctx context.Context, entry []byte) (*log.Receipt, error)
}

// Tree reads the committed log, for consistency proofs between anchored
// checkpoints and to tell whether the tree grew by more than anchor
// entries. A log.Storage is one.
type Tree interface {
	log.NodeReader
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}

// Options configure a [Runner].
type Options struct {
	Config  *Resolved
	Log     Log
	Tree    Tree
	Records *anchor.Store
	// Signer is the P-256 anchoring key (<data>/anchor.key).
	Signer *ecdsa.PrivateKey
	Logger *slog.Logger // nil: slog.Default()
	// HTTPClient carries TSA requests (nil: one without keep-alives
	// across rounds, which are minutes apart).
	HTTPClient *http.Client
	// MinBackoff and MaxBackoff bound the retry delay after a failure
	// (defaults 5s and the interval); it doubles per consecutive failure,
	// with jitter.
	MinBackoff, MaxBackoff time.Duration
}

// A Runner anchors the log's latest checkpoint with every configured
// authority. [Runner.Run] does it every interval when the tree grew by
// more than its own anchor entries, and retries failed authorities with
// exponential backoff; [Runner.AnchorNow] does it once.
//
// Each authority is asked on its own, in parallel, under the configured
// timeout; whatever any of them returns is accepted only after it
// verifies. The answers that verified are stored in one [Record], then an
// `anchor` entry naming the record goes into the log. If every authority
// failed nothing is stored or appended. The runner never holds a lock the
// sequencer needs: appends go on while it waits on the network.
type Runner struct {
	opts   Options
	cfg    *Resolved
	logger *slog.Logger
	auths  []*authority
	// sidecar is the store's sidecar id, which the anchor entries carry.
	sidecar string

	roundMu sync.Mutex // one round at a time

	mu        sync.Mutex
	last      *anchor.Stored // newest stored record
	unlogged  *anchor.Stored // stored, but its anchor entry is not in the log yet
	lastEntry int64          // index of last's anchor entry, -1 if unknown
	// rekorLast holds, by Rekor tree (rekorTree), the entry of that tree
	// in the newest record holding one that is linked (or the tree's
	// first): a new entry is linked to it (RekorClient.Link), also
	// across rounds Rekor failed or gave no proof, as the audit links
	// them (anchor's rekorHistory). An entry kept unlinked is never
	// linked from: its tree may be a fork the proof would have shown.
	rekorLast map[string]*rekor.Entry
	// rekorTrees holds, by Rekor log ID, the origin of the tree of its
	// newest entry: an entry of another tree is of a new shard, which
	// nothing links to the old one, and is kept saying so.
	rekorTrees map[string]string
	lastError  string
	lastErrAt  time.Time
	started    time.Time
}

// authority is one TSA or Rekor and its health.
type authority struct {
	// url is the authority's URL as it is shown (status, metrics,
	// /healthz, log lines): redacted, since an authority that wants
	// credentials gets them in its URL, and /metrics and /healthz are
	// public. The clients hold the URL they call.
	name, kind, url string
	tsa             *TSAClient
	rekor           *RekorClient

	// guarded by Runner.mu
	lastSuccess time.Time
	lastErr     string
	lastErrAt   time.Time
	failures    int
	unlinked    string // why its newest kept entry has no consistency proof (a Rekor's; "": linked)
	nextTry     time.Time
}

// NewRunner makes a runner. It reads the newest stored record, and if a
// crash left it without its anchor entry, Run appends it first. The
// authorities whose answers that record holds start with its time as
// their last success; the others with none.
func NewRunner(ctx context.Context, o Options) (*Runner, error) {
	if o.Config == nil || o.Log == nil || o.Tree == nil || o.Records == nil || o.Signer == nil {
		return nil, errors.New("anchor: Config, Log, Tree, Records and Signer are required")
	}
	r := &Runner{opts: o, cfg: o.Config, logger: o.Logger, started: time.Now(), lastEntry: -1}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	if r.opts.MinBackoff <= 0 {
		r.opts.MinBackoff = 5 * time.Second
	}
	if r.opts.MaxBackoff <= 0 {
		r.opts.MaxBackoff = r.cfg.Interval
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	}
	for i, t := range r.cfg.TSAs {
		r.auths = append(r.auths, &authority{
			name: fmt.Sprintf("tsa %d", i), kind: "rfc3161", url: log.RedactURL(t.URL),
			tsa: &TSAClient{URL: t.URL, Roots: t.Roots, Intermediates: t.Intermediates, Policy: t.Policy, HTTPClient: hc},
		})
	}
	if k := r.cfg.Rekor; k != nil {
		r.auths = append(r.auths, &authority{
			name: "rekor", kind: anchor.KindRekorV1, url: log.RedactURL(k.URL),
			rekor: &RekorClient{URL: k.URL, PublicKey: k.PublicKey, Signer: o.Signer, HTTPClient: hc},
		})
	}
	sidecar, err := o.Records.Sidecar()
	if err != nil {
		return nil, err
	}
	r.sidecar = sidecar
	last, err := o.Records.Last()
	if err != nil {
		return nil, err
	}
	r.last = last
	if r.cfg.Rekor != nil {
		if err := r.loadRekorLast(); err != nil {
			return nil, err
		}
	}
	if last != nil {
		idx, err := r.findEntry(ctx, last)
		if err != nil {
			return nil, err
		}
		if idx < 0 {
			r.unlogged = last
		}
		r.lastEntry = idx
		// Only the authorities whose answer the record holds succeeded
		// in its round; crediting every one showed an authority that
		// was down as healthy after a restart.
		for _, a := range r.auths {
			if a.answeredIn(last.Record) {
				a.lastSuccess = last.Record.Created
			}
		}
	}
	return r, nil
}

// answeredIn reports whether rec holds a's answer: a token from its URL
// if it is a TSA, an entry from its URL if it is a Rekor.
func (a *authority) answeredIn(rec *anchor.Record) bool {
	if a.tsa != nil {
		return slices.ContainsFunc(rec.Timestamps, func(t *rfc3161.Token) bool { return t.URL == a.url })
	}
	return slices.ContainsFunc(rec.Tlogs, func(t *anchor.Tlog) bool { return t.RekorV1 != nil && t.RekorV1.URL == a.url })
}

// loadRekorLast reads every stored record, oldest first, for the newest
// entry of each Rekor tree.
func (r *Runner) loadRekorLast() error {
	all, err := r.opts.Records.List()
	if err != nil {
		return err
	}
	r.rekorLast, r.rekorTrees = map[string]*rekor.Entry{}, map[string]string{}
	for _, st := range all {
		if st.Err == nil {
			r.noteRekor(st.Record)
		}
	}
	return nil
}

// noteRekor notes rec's Rekor entries as the newest of their trees to
// link from: those linked, and the first of a tree. Callers hold r.mu,
// or own r.
func (r *Runner) noteRekor(rec *anchor.Record) {
	for _, t := range rec.Tlogs {
		if t.RekorV1 == nil {
			continue
		}
		tree, ok := rekorTree(t.RekorV1)
		if !ok {
			continue
		}
		if t.RekorV1.Consistency != nil || r.rekorLast[tree] == nil {
			r.rekorLast[tree] = t.RekorV1
		}
		_, origin, _ := strings.Cut(tree, "\n")
		r.rekorTrees[t.RekorV1.LogID] = origin
	}
}

// rekorTree names the Rekor tree of e's checkpoint: Rekor's log ID and
// the checkpoint's origin.
func rekorTree(e *rekor.Entry) (string, bool) {
	cp, err := e.Checkpoint()
	if err != nil {
		return "", false
	}
	return e.LogID + "\n" + cp.Origin, true
}

// rekorBefore returns the entry of e's Rekor tree to link e from (see
// rekorLast), or nil; and when there is none, the origin of that Rekor's
// newest tree if e is of another ("" if not).
func (r *Runner) rekorBefore(e *rekor.Entry) (*rekor.Entry, string) {
	tree, ok := rekorTree(e)
	if !ok {
		return nil, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := r.rekorLast[tree]; prev != nil {
		return prev, ""
	}
	if old, ok := r.rekorTrees[e.LogID]; ok && e.LogID+"\n"+old != tree {
		return nil, old
	}
	return nil, ""
}

// findEntry returns the index of the anchor entry of st, or -1 if the log
// does not hold it: it scans the entries after the anchored size, where it
// must be, for one naming st's SHA-256. An entry naming st's file with
// other bytes' hash, when none names st's own, means the record changed
// after it was logged: an error, so that no second entry is signed over
// the changed file (one was, and the start said nothing). The hash
// decides, not the name: another sidecar of a shared log that anchored
// the same size before the names held a hash logged a record of the same
// name, and the sidecar whose entry came second did not start. An entry
// of another sidecar (its sidecar member another's id) never says that
// this one's record changed.
func (r *Runner) findEntry(ctx context.Context, st *anchor.Stored) (int64, error) {
	size, _ := r.opts.Log.Checkpoint()
	var changed error
	for start := st.Record.Size; start < size; start += 1024 {
		end := min(size, start+1024)
		entries, err := r.opts.Tree.Entries(ctx, start, end)
		if err != nil {
			return -1, fmt.Errorf("looking for the anchor entry of %s: %w", st.Name, err)
		}
		for i, b := range entries {
			if !bytes.Contains(b, []byte(st.SHA256)) && !bytes.Contains(b, []byte(st.Name)) {
				continue
			}
			e, err := log.ParseEntry(b)
			if err != nil || e.Kind != log.KindAnchor {
				continue
			}
			f, err := log.ParseAnchorEntry(e)
			switch {
			case err != nil:
			case f.RecordHash == st.SHA256:
				return int64(start) + int64(i), nil
			case f.Record == st.Name && (f.Sidecar == "" || f.Sidecar == r.sidecar) && changed == nil:
				changed = fmt.Errorf("anchor record %s changed after it was logged: entry %d names its bytes' SHA-256 %s, the file's is %s; put the record back (provlog audit names what differs)", st.Name, start+uint64(i), f.RecordHash, st.SHA256)
			}
		}
	}
	return -1, changed
}

// Run anchors every interval until ctx is done, starting at once. It
// returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	next := time.Now()
	for {
		wake := next
		r.mu.Lock()
		for _, a := range r.auths {
			if a.failures > 0 && a.nextTry.Before(wake) {
				wake = a.nextTry
			}
		}
		if r.unlogged != nil && !r.lastErrAt.IsZero() {
			if t := r.lastErrAt.Add(r.opts.MinBackoff); t.Before(wake) {
				wake = t
			}
		}
		r.mu.Unlock()
		timer := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		now := time.Now()
		regular := !now.Before(next)
		if regular {
			next = now.Add(r.cfg.Interval)
		}
		r.tick(ctx, regular)
		r.postpone(time.Now())
	}
}

// postpone moves on the retry of each failed authority that a tick left
// due: one that asked no one (the log's storage failed first) changed no
// retry time, and Run would wake for it again at once, in a spin.
func (r *Runner) postpone(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.auths {
		if a.failures > 0 && !a.nextTry.After(now) {
			a.nextTry = now.Add(r.backoff(a.failures))
		}
	}
}

// tick runs one wake-up of Run: on the regular schedule every authority
// not backing off anchors if the tree grew; between, failed authorities
// whose backoff ran out try again.
func (r *Runner) tick(ctx context.Context, regular bool) {
	r.roundMu.Lock()
	defer r.roundMu.Unlock()
	if !r.logPending(ctx) {
		return
	}
	now := time.Now()
	var retry, healthy []*authority
	r.mu.Lock()
	for _, a := range r.auths {
		switch {
		case a.failures > 0 && !a.nextTry.After(now):
			retry = append(retry, a)
		case a.failures == 0 && regular:
			healthy = append(healthy, a)
		}
	}
	r.mu.Unlock()
	// Failed authorities anchor whatever is latest when their backoff
	// runs out; healthy ones on the schedule, and only when something
	// besides anchor entries was appended.
	if len(healthy) > 0 {
		grown, err := r.grown(ctx)
		if err != nil {
			r.noteError(err)
			healthy = nil
		}
		if !grown {
			healthy = nil
		}
	}
	if due := append(retry, healthy...); len(due) > 0 {
		r.round(ctx, due)
	}
}

// AnchorNow anchors the latest checkpoint with every authority at once,
// grown or not, backing off or not, and returns the stored record. It
// fails with a nil record if no authority's answer verified or storing
// failed; the failures of single authorities are in [Runner.Status]. If
// the record was stored but its anchor entry could not be appended, it
// returns both: the entry is appended before the next round.
func (r *Runner) AnchorNow(ctx context.Context) (*anchor.Stored, error) {
	r.roundMu.Lock()
	defer r.roundMu.Unlock()
	if !r.logPending(ctx) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return nil, fmt.Errorf("appending the anchor entry of %s: %s", r.unlogged.Name, r.lastError)
	}
	return r.round(ctx, r.auths)
}

// logPending appends the anchor entry of a record stored earlier whose
// append failed (or was cut short by a crash). It reports whether nothing
// is pending any more.
func (r *Runner) logPending(ctx context.Context) bool {
	r.mu.Lock()
	st := r.unlogged
	r.mu.Unlock()
	if st == nil {
		return true
	}
	if err := r.appendEntry(ctx, st); err != nil {
		r.noteError(err)
		return false
	}
	return true
}

// grown reports whether the log has entries after the newest anchored
// checkpoint other than anchor entries (which would otherwise make every
// anchor the reason for the next).
func (r *Runner) grown(ctx context.Context) (bool, error) {
	size, _ := r.opts.Log.Checkpoint()
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if last == nil {
		return size > 0, nil
	}
	from := last.Record.Size
	if size <= from {
		return false, nil
	}
	if size-from > 8 {
		return true, nil
	}
	entries, err := r.opts.Tree.Entries(ctx, from, size)
	if err != nil {
		return false, fmt.Errorf("reading entries after the last anchor: %w", err)
	}
	for _, b := range entries {
		e, err := log.ParseEntry(b)
		if err != nil || e.Kind != log.KindAnchor {
			return true, nil
		}
	}
	return false, nil
}

// round anchors the latest checkpoint with the given authorities.
func (r *Runner) round(ctx context.Context, auths []*authority) (*anchor.Stored, error) {
	rec, digest, err := r.newRecord(ctx)
	if errors.Is(err, errEmptyLog) {
		return nil, err // nothing to anchor yet: not a failure
	} else if err != nil {
		return nil, r.noteError(err)
	}
	answers := r.ask(ctx, auths, digest)
	now := time.Now()
	var failed []error
	for i, a := range auths {
		ans := answers[i]
		if ans.err != nil {
			failed = append(failed, fmt.Errorf("%s (%s): %w", a.name, a.url, ans.err))
			r.fail(a, ans.err, now)
			continue
		}
		if ans.tok != nil {
			rec.Timestamps = append(rec.Timestamps, ans.tok)
		} else {
			rec.Tlogs = append(rec.Tlogs, &anchor.Tlog{Kind: anchor.KindRekorV1, RekorV1: ans.ent})
		}
	}
	if len(rec.Timestamps)+len(rec.Tlogs) == 0 {
		return nil, r.noteError(fmt.Errorf("no authority anchored size %d: %w", rec.Size, errors.Join(failed...)))
	}
	rec.Created = now.UTC()
	st, err := r.opts.Records.Put(rec)
	if err != nil {
		return nil, r.noteError(err)
	}
	r.mu.Lock()
	r.last = st
	if r.rekorLast != nil {
		r.noteRekor(rec)
	}
	r.unlogged = st
	r.lastEntry = -1
	r.lastError = "" // a round that anchored ends the error of an earlier one (it stayed for ever)
	for i, a := range auths {
		if answers[i].err == nil {
			a.lastSuccess, a.failures, a.nextTry = now, 0, time.Time{}
		}
		if u := answers[i].unlinked; u != nil {
			a.lastErr, a.lastErrAt, a.unlinked = u.Error(), now, u.Error()
		} else if answers[i].ent != nil {
			a.unlinked = ""
		}
	}
	r.mu.Unlock()
	for i, a := range auths {
		if u := answers[i].unlinked; u != nil {
			r.logger.Warn("anchoring: Rekor entry kept unlinked", "authority", a.name, "url", a.url, "err", u)
		}
	}
	r.logger.Info("anchored checkpoint", "size", rec.Size, "record", st.Name,
		"timestamps", len(rec.Timestamps), "tlogs", len(rec.Tlogs), "failed", len(failed))
	if err := r.appendEntry(ctx, st); err != nil {
		return st, r.noteError(err)
	}
	return st, nil
}

// newRecord starts the record of the log's latest checkpoint, with no
// answers yet: the checkpoint, its digest (returned too), the anchoring
// key and the consistency proof from the last anchored checkpoint, which
// must hold.
func (r *Runner) newRecord(ctx context.Context) (*anchor.Record, []byte, error) {
	size, note := r.opts.Log.Checkpoint()
	if size == 0 {
		return nil, nil, errEmptyLog
	}
	cp, err := log.ParseCheckpointNote(note)
	if err != nil {
		return nil, nil, fmt.Errorf("latest checkpoint: %w", err)
	}
	rec := &anchor.Record{
		V:          anchor.RecordVersion,
		Checkpoint: string(note),
		Origin:     cp.Origin,
		Size:       cp.Size,
		Root:       cp.Hash,
		Timestamps: []*rfc3161.Token{},
		Tlogs:      []*anchor.Tlog{},
	}
	digest := anchor.CheckpointDigest(note)
	rec.Digest = fmt.Sprintf("%x", digest)
	if rec.AnchorKey, err = x509.MarshalPKIXPublicKey(&r.opts.Signer.PublicKey); err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if last == nil {
		return rec, digest, nil
	}
	p := last.Record
	if p.Size > rec.Size {
		return nil, nil, fmt.Errorf("latest checkpoint has size %d, below the anchored size %d", rec.Size, p.Size)
	}
	proof, err := log.ProveConsistency(ctx, r.opts.Tree, p.Size, rec.Size)
	if err != nil {
		return nil, nil, fmt.Errorf("consistency proof from the last anchor: %w", err)
	}
	rec.Previous = &anchor.Consistency{Size: p.Size, Root: p.Root, Proof: proof}
	if err := log.VerifyConsistency(p.Size, rec.Size, proof, p.Root, rec.Root); err != nil {
		// The log's own tree contradicts an anchored checkpoint.
		return nil, nil, fmt.Errorf("latest checkpoint is not consistent with the anchored size %d: %w", p.Size, err)
	}
	return rec, digest, nil
}

var errEmptyLog = errors.New("the log is empty")

// An answer is one authority's answer to a round: a token, an entry or
// why not.
type answer struct {
	tok *rfc3161.Token
	ent *rekor.Entry
	err error
	// unlinked says why ent, kept, has no consistency proof.
	unlinked error
}

// ask asks every authority at once, each within the timeout, to anchor
// digest, and returns their answers in order.
//
// A Rekor's entry is linked to the newest linked entry of its tree (or
// its first), however many rounds Rekor failed or gave no proof since
// (see [RekorClient.Link]): one that shows Rekor forked is refused.
func (r *Runner) ask(ctx context.Context, auths []*authority, digest []byte) []answer {
	answers := make([]answer, len(auths))
	var wg sync.WaitGroup
	for i, a := range auths {
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			defer cancel()
			if a.tsa != nil {
				answers[i].tok, answers[i].err = a.tsa.Timestamp(actx, digest)
				return
			}
			e, err := a.rekor.Upload(actx, digest)
			if err == nil {
				prev, oldTree := r.rekorBefore(e)
				if err = a.rekor.Link(actx, e, prev, digest); err == nil && oldTree != "" {
					cp, _ := e.Checkpoint()
					err = fmt.Errorf("%w: Rekor moved from its tree %q to a new one, %q, which nothing links to the old", errUnlinked, log.Printable(oldTree), log.Printable(cp.Origin))
				}
			}
			if errors.Is(err, errUnlinked) {
				answers[i].unlinked, err = err, nil
			}
			if err != nil {
				e = nil
			}
			answers[i].ent, answers[i].err = e, err
		})
	}
	wg.Wait()
	return answers
}

// appendEntry appends the anchor entry of st.
func (r *Runner) appendEntry(ctx context.Context, st *anchor.Stored) error {
	b, err := anchor.MarshalEntry(st, r.sidecar, time.Now())
	if err != nil {
		return fmt.Errorf("making the anchor entry of %s: %w", st.Name, err)
	}
	rc, err := r.opts.Log.Append(ctx, b)
	if err != nil {
		return fmt.Errorf("appending the anchor entry of %s: %w", st.Name, err)
	}
	r.mu.Lock()
	if r.unlogged == st {
		r.unlogged = nil
	}
	if r.last == st {
		r.lastEntry = int64(rc.Index)
	}
	r.mu.Unlock()
	return nil
}

// fail records a failure of a and schedules its retry.
func (r *Runner) fail(a *authority, err error, now time.Time) {
	r.mu.Lock()
	a.failures++
	a.lastErr, a.lastErrAt = err.Error(), now
	d := r.backoff(a.failures)
	a.nextTry = now.Add(d)
	failures := a.failures
	r.mu.Unlock()
	r.logger.Warn("anchoring failed", "authority", a.name, "url", a.url, "err", err, "failures", failures, "retry_in", d.Round(time.Millisecond).String())
}

// backoff is the retry delay after the given number of consecutive
// failures: doubling from MinBackoff up to MaxBackoff, with jitter.
func (r *Runner) backoff(failures int) time.Duration {
	d := r.opts.MinBackoff << min(failures-1, 20)
	if d > r.opts.MaxBackoff || d <= 0 {
		d = r.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1) // jitter, so that authorities do not retry in lockstep
}

// noteError records an error that is no authority's, and returns it.
func (r *Runner) noteError(err error) error {
	r.mu.Lock()
	r.lastError, r.lastErrAt = err.Error(), time.Now()
	r.mu.Unlock()
	r.logger.Warn("anchoring failed", "err", err)
	return err
}

package main

// The anchoring side of the sidecar and commands: starting the runner in
// serve, `provlog anchor`, the anchor part of `provlog audit`, and the
// status and metrics lines. The logic is in package anchor; this file only
// wires it to the data dir (see the anchor package's doc for the config).

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
)

// anchorDir holds the anchor records in a data dir.
const anchorDir = "anchors"

// anchoring is the running anchor runner of a sidecar.
type anchoring struct {
	runner *online.Runner
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openAnchorRunner resolves acfg (relative file names from baseDir), loads
// <data>/anchor.key and makes the runner over seq and store.
func openAnchorRunner(ctx context.Context, data string, acfg *online.Config, baseDir string, seq *server.Sequencer, cosigned func() []byte, store log.Storage, logger *slog.Logger) (*online.Runner, error) {
	res, err := acfg.Resolve(configReader(baseDir))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(data, anchorKeyFile))
	if err != nil {
		return nil, fmt.Errorf("reading the anchoring key: %w", err)
	}
	signer, err := online.ParseSigner(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(data, anchorKeyFile), err)
	}
	if err := checkAnchorKey(ctx, store, signer, filepath.Join(data, anchorKeyFile)); err != nil {
		return nil, err
	}
	records, err := anchor.OpenStore(filepath.Join(data, anchorDir))
	if err != nil {
		return nil, err
	}
	lg := anchoredLog{Sequencer: seq, cosigned: cosigned, store: store, records: records}
	return online.NewRunner(ctx, online.Options{Config: res, Log: lg, Tree: store, Records: records, Signer: signer, Logger: logger})
}

// checkAnchorKey refuses an anchoring key (read from path) that is not
// the one the log's genesis entry names: every anchor it signed would
// fail the audit ("the record's anchoring key is not the log's"), while
// the sidecar reported anchoring as healthy. A log without a genesis yet
// has nothing to compare with.
func checkAnchorKey(ctx context.Context, store log.Storage, signer *ecdsa.PrivateKey, path string) error {
	es, err := store.Entries(ctx, 0, 1)
	if errors.Is(err, log.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the genesis entry to check the anchoring key: %w", err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		return fmt.Errorf("reading the genesis entry to check the anchoring key: %w", err)
	}
	g, err := log.ParseGenesis(e)
	if err != nil {
		return fmt.Errorf("reading the genesis entry to check the anchoring key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&signer.PublicKey)
	if err != nil {
		return err
	}
	if len(g.AnchorKey) > 0 && !bytes.Equal(der, g.AnchorKey) {
		return fmt.Errorf("%s is not the anchoring key this log's genesis entry names, so nothing it anchors would verify; put back the data dir's own anchor.key", path)
	}
	return nil
}

// anchoredLog is the log as the anchor runner sees it. With witnesses
// (cosigned not nil) it offers the newest cosigned checkpoint, so that the
// checkpoint anchored is the one the witnesses vouch for and one
// checkpoint carries both (what provlog evidence looks for); until they
// cosign one, or while they cosigned nothing newer than the newest
// anchor, the log's latest, so a witness outage never stops anchoring.
type anchoredLog struct {
	*server.Sequencer
	cosigned func() []byte
	store    log.Storage
	records  *anchor.Store
}

func (l anchoredLog) Checkpoint() (uint64, []byte) {
	size, own := l.Sequencer.Checkpoint()
	if l.cosigned == nil {
		return size, own
	}
	c := l.cosigned()
	cp, err := log.ParseCheckpointNote(c)
	if c == nil || err != nil {
		return size, own
	}
	// Only the log's own checkpoint of that size, cosignatures added.
	mine, err := l.store.Checkpoint(context.Background(), cp.Size)
	if err != nil || !bytes.HasPrefix(c, mine) {
		return size, own
	}
	// Witnesses that cosigned nothing since the newest anchor (down, or
	// slow) must not stop anchoring: then the log's own latest.
	if last, err := l.records.Last(); err != nil || (last != nil && last.Record.Size >= cp.Size) {
		return size, own
	}
	return cp.Size, c
}

// startAnchoring starts anchoring for a sidecar; stop it before closing
// the sequencer.
func startAnchoring(ctx context.Context, sc *sidecar, acfg *online.Config, baseDir string) (*anchoring, error) {
	var cosigned func() []byte
	if sc.witness != nil {
		cosigned = sc.witness.cos.Latest
	}
	r, err := openAnchorRunner(ctx, sc.cfg.Data, acfg, baseDir, sc.seq, cosigned, sc.store, sc.logger.With("component", "anchor"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &anchoring{runner: r, cancel: cancel}
	a.wg.Go(func() { r.Run(ctx) })
	return a, nil
}

// stop stops the runner and waits for a round under way.
func (a *anchoring) stop() {
	if a == nil {
		return
	}
	a.cancel()
	a.wg.Wait()
}

// status is the "anchoring" member of provlog__status and /healthz.
func (a *anchoring) status() any {
	if a == nil {
		return "not configured (add anchors: to the config)"
	}
	return a.runner.Status()
}

// writeMetrics writes the anchoring gauges in Prometheus text form.
func (a *anchoring) writeMetrics(w io.Writer) {
	if a == nil {
		return
	}
	s := a.runner.Status()
	fmt.Fprintf(w, "# HELP provlog_anchor_gap_seconds Age of the newest anchor while entries are unanchored (0 when all are anchored).\n# TYPE provlog_anchor_gap_seconds gauge\nprovlog_anchor_gap_seconds %g\n", s.GapSeconds)
	fmt.Fprintf(w, "# HELP provlog_anchor_unanchored_entries Entries after the newest anchored checkpoint.\n# TYPE provlog_anchor_unanchored_entries gauge\nprovlog_anchor_unanchored_entries %d\n", s.Unanchored)
	fmt.Fprintf(w, "# HELP provlog_anchor_last_size Size of the newest anchored checkpoint.\n# TYPE provlog_anchor_last_size gauge\nprovlog_anchor_last_size %d\n", s.LastSize)
	fmt.Fprintf(w, "# HELP provlog_anchor_failures Consecutive failures per authority.\n# TYPE provlog_anchor_failures gauge\n")
	for _, au := range s.Authorities {
		fmt.Fprintf(w, "provlog_anchor_failures{authority=%q,url=%q} %d\n", au.Name, au.URL, au.ConsecutiveFailures)
	}
}

// anchorsHandler serves /log/anchors from a data dir.
func anchorsHandler(data string, authorized func(*http.Request) bool) http.Handler {
	records, err := anchor.OpenStore(filepath.Join(data, anchorDir))
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "anchor records are unavailable", http.StatusInternalServerError)
		})
	}
	return online.NewHandler(records, authorized)
}

// anchorNow is `provlog anchor`: it opens a stopped sidecar's data dir,
// anchors its latest checkpoint with every authority, and appends the
// anchor entry.
func anchorNow(ctx context.Context, data, storeURL string, acfg *online.Config, baseDir string, stdout io.Writer) error {
	if acfg == nil {
		return errors.New("the config has no anchors: section")
	}
	store, seq, err := openAppender(ctx, data, storeURL)
	if errors.Is(err, logpebble.ErrLocked) {
		return fmt.Errorf("data dir %s is held by a running provlog sidecar, which anchors by itself every interval (see provlog__status)", data)
	}
	if err != nil {
		return err
	}
	defer store.Close()
	defer seq.Close()
	// The outcome is printed below; the runner's own log lines would
	// repeat it.
	r, err := openAnchorRunner(ctx, data, acfg, baseDir, seq, nil, store, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	st, err := r.AnchorNow(ctx)
	for _, a := range r.Status().Authorities {
		if a.LastError != "" && a.ConsecutiveFailures > 0 {
			fmt.Fprintf(stdout, "FAILED %s %s: %s\n", a.Name, a.URL, a.LastError)
		}
	}
	if st == nil {
		return err
	}
	rec := st.Record
	fmt.Fprintf(stdout, "anchored size %d (checkpoint sha256 %s) in %s: %d timestamp(s), %d Rekor entr(ies)\n",
		rec.Size, rec.Digest, filepath.Join(data, anchorDir, st.Name), len(rec.Timestamps), len(rec.Tlogs))
	for _, t := range rec.Timestamps {
		fmt.Fprintf(stdout, "  %s: %s\n", t.URL, t.Time.Format("2006-01-02T15:04:05Z07:00"))
	}
	for _, t := range rec.Tlogs {
		if e := t.RekorV1; e != nil {
			fmt.Fprintf(stdout, "  %s: log index %d, uuid %s\n", e.URL, e.LogIndex, e.UUID)
		}
	}
	return err // the anchor entry could not be appended; the next run appends it
}

// auditAnchors is the anchor part of `provlog audit --data D`, run after
// log.Audit verified the log up to size: every record in <data>/anchors
// is verified offline against the log, with the anchoring key from the
// genesis entry and, when acfg is not nil, the configured TSA roots and
// Rekor key (else the records' own, which it says). cfgPath names the
// config given, if any, so the report can say why nothing was pinned.
func auditAnchors(ctx context.Context, data string, store log.Storage, v note.Verifier, size uint64, acfg *online.Config, baseDir, cfgPath string, stdout io.Writer) (*anchor.AuditReport, error) {
	dir := filepath.Join(data, anchorDir)
	_, noDir := os.Stat(dir)
	key, err := genesisAnchorKey(ctx, store)
	if err != nil && !errors.Is(noDir, os.ErrNotExist) {
		return nil, err // without records (or a key) the log's anchor entries are still checked
	}
	// A log in PostgreSQL is shared: other sidecars' anchor entries name
	// records kept in their data dirs. Pebble's is this data dir's alone.
	_, pebble := store.(*logpebble.Store)
	opts := anchor.AuditOptions{Verifier: v, AnchorKey: key, Log: store, Size: size, Shared: !pebble}
	if acfg != nil {
		res, err := acfg.Resolve(configReader(baseDir))
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		opts.Trust = res.Trust
	}
	rep, err := anchor.AuditAll(ctx, dir, opts)
	if err != nil {
		var ae *log.ProblemsError
		if errors.As(err, &ae) {
			var b strings.Builder
			for _, p := range ae.Problems {
				fmt.Fprintf(&b, "\n  %s", p)
			}
			return rep, failed(ae, "FAILED: the anchors do not verify (%d of %d records verified; the log's anchor entries and the times of the entries they cover are checked against them):%s", rep.Verified, rep.Records, b.String())
		}
		return rep, fmt.Errorf("FAILED auditing anchors: %w", err)
	}
	elsewhere := ""
	if rep.Elsewhere > 0 {
		elsewhere = fmt.Sprintf("anchors: %d anchor entries made by other sidecars of this log, records not here (audit their data dirs to verify them)\n", rep.Elsewhere)
	}
	if rep.Records == 0 {
		switch {
		case rep.Elsewhere > 0:
			fmt.Fprint(stdout, "anchors: none of this data dir's\n"+elsewhere)
		case errors.Is(noDir, os.ErrNotExist):
			fmt.Fprintln(stdout, "anchors: none (no anchors directory, and no anchor entry in the log)")
		default:
			fmt.Fprintln(stdout, "anchors: none yet")
		}
		return rep, nil
	}
	trust := "configured TSA roots and Rekor key"
	if rep.SelfTrusted {
		trust = "the roots and keys stored in the records (pass --config to pin them)"
		if cfgPath != "" {
			trust = fmt.Sprintf("the roots and keys stored in the records (%s has no anchors: section to pin them)", cfgPath)
		}
	}
	fmt.Fprintf(stdout, "OK: %d anchors verified offline (%d timestamps, %d Rekor entries, %d anchor entries in the log) against %s",
		rep.Verified, rep.Timestamps, rep.Tlogs, rep.Entries, trust)
	if rep.Verified > 0 {
		fmt.Fprintf(stdout, "; newest: size %d at %s", rep.LastSize, rep.LastTime.Format("2006-01-02T15:04:05Z07:00"))
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, elsewhere)
	if n := len(rep.RekorUnlinked); n > 0 {
		fmt.Fprintf(stdout, "note: %d records (the first %s) keep no Rekor consistency proof from the record before (made before records kept it, Rekor did not give it at upload, or Rekor moved to a new tree): Rekor's checkpoints of theirs are compared only size for size\n", n, rep.RekorUnlinked[0])
	}
	for _, n := range rep.Unlogged {
		fmt.Fprintf(stdout, "note: %s has no anchor entry in the log yet (the sidecar stopped before appending it; it appends it on start)\n", n)
	}
	return rep, nil
}

// genesisAnchorKey returns the anchoring public key the log's genesis
// entry commits to.
func genesisAnchorKey(ctx context.Context, src interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}) (crypto.PublicKey, error) {
	es, err := src.Entries(ctx, 0, 1)
	if err != nil || len(es) != 1 {
		return nil, fmt.Errorf("reading the genesis entry: %v", err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil || e.Kind != log.KindGenesis {
		return nil, errors.New("entry 0 is not a genesis entry")
	}
	g, err := log.ParseGenesis(e)
	if err != nil {
		return nil, err
	}
	if len(g.AnchorKey) == 0 {
		return nil, errors.New("the genesis entry has no anchor_key")
	}
	return x509.ParsePKIXPublicKey(g.AnchorKey)
}

// configReader reads the files a config names (anchors' roots and keys),
// relative to the config file's directory dir: only cmd reads files.
func configReader(dir string) func(name string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return os.ReadFile(name)
	}
}

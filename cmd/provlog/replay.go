package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/replay"
	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/tlog"
)

// replayOutput is what --json prints.
type replayOutput struct {
	*replay.Report
	// Recorded is the index of the replay entry appended to the log.
	Recorded *uint64 `json:"recorded_index"`
	// Note says which members the entry pins by their hash, if it was
	// too large for the log ([replay.Record.Fit]).
	Note string `json:"note,omitempty"`
}

// runReplay re-runs recorded calls against the live downstreams and
// classifies them (package proxy/replay). The run is recorded as a
// replay entry ([replay.Record]): with --data directly, with --log
// through the running sidecar's record_replay tool (the token's actor is
// the entry's).
//
// It exits 1, after printing and recording the report, when a call's
// tool is now listed with another definition than the one the call was
// made against, whatever its result: the server no longer offers the
// tool the agent chose to call, which is how a rug pull shows, and an
// unchanged result does not vouch for the call a changed description
// would lead an agent to make. A changed result exits 0: data moves on,
// and the report explains it (releases, flaky tools).
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", stderr)
	data := fs.String("data", "", "data dir of a stopped sidecar (the replay run is appended to its log)")
	logURL := fs.String("log", "", "base URL of a running sidecar (the run is recorded through its record_replay tool, as the token's actor)")
	token := fs.String("token", os.Getenv("PROVLOG_TOKEN"), "an actor's token for --log: it reads the log and records the run (default $PROVLOG_TOKEN)")
	cfgPath := fs.String("config", "", "config naming the downstream servers (replay, replay_ignore, source)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	runs := fs.Int("runs", replay.DefaultRuns, "fresh runs per call (>= 2 checks flakiness)")
	single := fs.Bool("single-run", false, "run each call once: no flakiness check (a flaky tool is reported as changed)")
	from := fs.Uint64("from", 0, "first entry index")
	to := fs.Uint64("to", 0, "end of the range, exclusive (default: the log's size)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if (*data == "") == (*logURL == "") {
		return usageErr("give exactly one of --data and --log")
	}
	if *cfgPath == "" {
		return usageErr("--config is required")
	}
	if *runs < 1 {
		return usageErr("--runs must be at least 1")
	}
	if *single {
		*runs = 1
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := replay.Options{Servers: cfg.Servers, Runs: *runs, Logger: logger, Version: version}

	var src *replayLog
	if *data != "" {
		src, err = openReplayLocal(ctx, *data, cfg.Store, *from, *to, &opts)
	} else {
		src, err = openReplayRemote(ctx, *logURL, *token, *from, *to, &opts)
	}
	if err != nil {
		return err
	}
	defer src.close()
	if *from > src.to {
		return usageErr("--from %d is past the end of the range (%d)", *from, src.to)
	}
	rep, err := replay.Run(ctx, src.entries, *from, opts)
	if err != nil {
		return err
	}
	out := replayOutput{Report: rep}
	// Through a sidecar the entry's actor is the token's, whatever this
	// says; in a data dir it is the operator's, whom no token names.
	recorded, hashed, err := src.record(ctx, rep.Record(operatorActor, time.Now(), cfg.Servers))
	if err != nil {
		return err
	}
	out.Recorded, out.Note = &recorded, fitNote(hashed)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printReplay(stdout, out)
	}
	if n := rep.Definitions[replay.DefinitionChanged] + rep.Definitions[replay.DefinitionGone]; n > 0 {
		var idx []uint64
		for _, o := range rep.Outcomes {
			if o.DefinitionChanged() {
				idx = append(idx, o.Index)
			}
		}
		return fmt.Errorf("tool definitions changed since %d call(s) were made (entries %s): their servers now list those tools otherwise, or not at all; see definition_changes in replay entry %d", n, replay.Ranges(idx), recorded)
	}
	return nil
}

// A replayLog is the log a replay reads its calls from and records its
// run in: a stopped sidecar's data dir, or a running sidecar's log API.
type replayLog struct {
	entries [][]byte // the range's
	to      uint64   // the range's end
	// record appends the run's entry and returns its index and the
	// members that were replaced by their hash to fit it.
	record func(ctx context.Context, r *replay.Record) (uint64, []string, error)
	close  func()
}

// openReplayLocal reads entries [from, to) of the data dir's log, or of
// the shared log storeURL names (the config's store:), to 0 or past the
// end: its size, and opens its sequencer for the run's entry; opts gets
// the log's blobs (openBlobs: a shared log's table, as serve reads them)
// and the reader of entries after the range.
func openReplayLocal(ctx context.Context, data, storeURL string, from, to uint64, opts *replay.Options) (*replayLog, error) {
	store, seq, err := openAppender(ctx, data, storeURL)
	if err != nil {
		return nil, err
	}
	l := &replayLog{close: func() { seq.Close(); store.Close() }}
	size, cpb := seq.Checkpoint()
	if opts.Blobs, err = openBlobs(data, store); err != nil {
		l.close()
		return nil, err
	}
	// The entries are checked against the tree of the log's checkpoint,
	// as --log checks them: an entry edited in the data dir is not sent
	// to a server as a call the log holds.
	c, err := log.ParseCheckpointNote(cpb)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("the log's checkpoint: %w", err)
	}
	read := func(ctx context.Context, start, end uint64) ([][]byte, error) {
		return checkedLocalEntries(ctx, store, c, start, end)
	}
	if l.to = to; to == 0 || to > size {
		l.to = size
	}
	if from < l.to {
		if l.entries, err = read(ctx, from, l.to); err != nil {
			l.close()
			return nil, err
		}
	}
	opts.After = entriesAfter(read, size)
	l.record = func(ctx context.Context, r *replay.Record) (uint64, []string, error) {
		hashed := r.Fit()
		b, err := r.Marshal()
		if err != nil {
			return 0, nil, fmt.Errorf("recording the replay run: %w", err)
		}
		rc, err := seq.Append(ctx, b)
		if err != nil {
			return 0, nil, fmt.Errorf("recording the replay run: %w", err)
		}
		return rc.Index, hashed, nil
	}
	return l, nil
}

// checkedLocalEntries reads entries [start, end) of store and checks
// them against the tree of checkpoint c: the root their leaf hashes make
// with the stored nodes either side of them must be c's.
func checkedLocalEntries(ctx context.Context, store log.Storage, c log.Checkpoint, start, end uint64) ([][]byte, error) {
	es, err := store.Entries(ctx, start, end)
	if err != nil {
		return nil, err
	}
	nodes := func(b, e uint64) ([][]byte, error) {
		ids := compact.RangeNodes(b, e, nil)
		if len(ids) == 0 {
			return nil, nil
		}
		return store.ReadNodes(ctx, ids)
	}
	left, err := nodes(0, start)
	if err != nil {
		return nil, fmt.Errorf("reading the tree's nodes left of [%d, %d): %w", start, end, err)
	}
	right, err := nodes(end, c.Size)
	if err != nil {
		return nil, fmt.Errorf("reading the tree's nodes right of [%d, %d): %w", start, end, err)
	}
	rf := &compact.RangeFactory{Hash: log.NodeHash}
	rng, err := rf.NewRange(0, start, left)
	if err != nil {
		return nil, fmt.Errorf("the tree's nodes left of entry %d: %w", start, err)
	}
	for _, e := range es {
		if err := rng.Append(log.LeafHash(e), nil); err != nil {
			return nil, err
		}
	}
	rr, err := rf.NewRange(end, c.Size, right)
	if err == nil {
		err = rng.AppendRange(rr, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("the tree's nodes right of entry %d: %w", end-1, err)
	}
	if root, err := rng.GetRootHash(nil); err != nil || !bytes.Equal(root, c.Hash) {
		return nil, fmt.Errorf("entries [%d, %d) of the data dir are not those the tree of its checkpoint (size %d) holds: %s: refusing them", start, end, c.Size, badEntries(ctx, store, es, start))
	}
	return es, nil
}

// badEntries names the entries of es (from start) whose leaf hash is not
// the one the store keeps for them, or says the tree's nodes differ.
func badEntries(ctx context.Context, store log.Storage, es [][]byte, start uint64) string {
	ids := make([]compact.NodeID, len(es))
	for i := range es {
		ids[i] = compact.NewNodeID(0, start+uint64(i))
	}
	hs, err := store.ReadNodes(ctx, ids)
	if err != nil || len(hs) != len(es) {
		return "the tree's nodes cannot be read"
	}
	var bad []uint64
	for i, e := range es {
		if !bytes.Equal(log.LeafHash(e), hs[i]) {
			bad = append(bad, start+uint64(i))
		}
	}
	if len(bad) == 0 {
		return "the tree's stored nodes were changed"
	}
	return "entry " + replay.Ranges(bad) + " was changed"
}

// openReplayRemote reads entries [from, to) of a running sidecar's log;
// the run is recorded through its MCP front, where the entry's actor is
// the token's.
func openReplayRemote(ctx context.Context, logURL, token string, from, to uint64, opts *replay.Options) (*replayLog, error) {
	r := newRemote(logURL, token)
	// The entries are checked against the tree of the log's checkpoint
	// (its hash tiles, authenticated against the root), so that no entry
	// the log API changed is sent to a server; replay has no key to check
	// the checkpoint's signature with (provlog audit does that).
	cpb, err := r.get(ctx, "/log/checkpoint")
	if err != nil {
		return nil, err
	}
	c, err := log.ParseCheckpointNote(cpb)
	if err != nil {
		return nil, fmt.Errorf("the log's checkpoint: %w", err)
	}
	size := c.Size
	hr := tlog.TileHashReader(tlog.Tree{N: int64(c.Size), Hash: tlog.Hash(c.Hash)}, &remoteTiles{ctx: ctx, r: r})
	read := func(ctx context.Context, start, end uint64) ([][]byte, error) {
		return r.checkedEntries(ctx, hr, start, end)
	}
	l := &replayLog{close: func() {}}
	if l.to = to; to == 0 || to > size {
		l.to = size
	}
	if from < l.to {
		if l.entries, err = read(ctx, from, l.to); err != nil {
			return nil, err
		}
	}
	opts.After = entriesAfter(read, size)
	l.record = func(ctx context.Context, r *replay.Record) (uint64, []string, error) {
		// The sidecar fits the entry under the token's actor and auth;
		// fitted here, under the operator's actor (r's), it had members
		// pinned by their hash that the sidecar could have written in
		// full. Only what record_replay's own limit needs is pinned here.
		hashed := fitArgs(r)
		i, more, err := recordReplayRemote(ctx, logURL, token, r)
		for _, m := range more {
			if !slices.Contains(hashed, m) {
				hashed = append(hashed, m)
			}
		}
		return i, hashed, err
	}
	return l, nil
}

// printedPaths names RFC 6901's empty pointer, the result as a whole
// (a result that changed type, or a member of it not named), in words.
func printedPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if p == "" {
			p = "(the whole result)"
		}
		out[i] = p
	}
	return out
}

func printReplay(w io.Writer, out replayOutput) {
	rep := out.Report
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tCALL\tCLASS\tDEFINITION\tDETAIL")
	for _, o := range rep.Outcomes {
		var d []string
		if o.Reason != "" {
			d = append(d, o.Reason)
		}
		if o.Class == replay.Changed && (o.ReleaseThen != "" || o.ReleaseNow != "") {
			rel := fmt.Sprintf("release %s → %s", orNone(o.ReleaseThen), orNone(o.ReleaseNow))
			if o.SameRelease {
				rel += " (same release: suspicious)"
			}
			d = append(d, rel)
		}
		if len(o.Paths) > 0 {
			d = append(d, "paths "+strings.Join(printedPaths(o.Paths), " "))
		}
		if o.Note != "" {
			d = append(d, o.Note)
		}
		def := o.Definition
		if def == "" {
			def = "-"
		}
		// The call's names and the detail are the log's and the server's
		// words, escaped so that they cannot act on the auditor's terminal.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", o.Index, log.Printable(o.Server+"/"+o.Tool), o.Class, def, log.Printable(strings.Join(d, "; ")))
	}
	tw.Flush()
	var counts []string
	for _, c := range replay.Classes {
		counts = append(counts, fmt.Sprintf("%d %s", rep.Counts[c], c))
	}
	fmt.Fprintf(w, "entries [%d, %d), %d run(s) per call: %s\n", rep.From, rep.To, rep.Runs, strings.Join(counts, ", "))
	counts = counts[:0]
	for _, d := range replay.Definitions {
		counts = append(counts, fmt.Sprintf("%d %s", rep.Definitions[d], d))
	}
	fmt.Fprintf(w, "tool definitions then and now: %s\n", strings.Join(counts, ", "))
	if ch := rep.DefinitionChanges(); len(ch) > 0 {
		fmt.Fprintln(w, "CHANGED TOOL DEFINITIONS: the server lists these tools otherwise than when the calls were made, or not at all (a changed description or schema can make an agent act otherwise; compare the tools entries):")
		for _, c := range ch {
			now := c.Now + " now"
			if c.Now == "" {
				now = "no longer listed"
			}
			fmt.Fprintln(w, log.Printable(fmt.Sprintf("  %s/%s, calls %s: tool_sha256 %s then, %s", c.Server, c.Tool, c.Calls, c.Then, now)))
		}
	}
	if rep.Runs == 1 {
		fmt.Fprintln(w, "single run: flakiness not checked; a flaky tool shows as changed")
	}
	if out.Recorded != nil {
		fmt.Fprintf(w, "recorded as replay entry %d\n", *out.Recorded)
	}
	if out.Note != "" {
		fmt.Fprintln(w, out.Note)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// fitNote says which members [replay.Record.Fit] replaced by their hash,
// "" if none: the entry no longer lists them, and whoever reads the
// report should know where the log only pins it.
func fitNote(hashed []string) string {
	if len(hashed) == 0 {
		return ""
	}
	var as []string
	for _, m := range hashed {
		as = append(as, m+" as "+m+"_sha256")
	}
	return "the replay entry was too large for the log as it is written: it holds " + strings.Join(as, " and ") + ", the SHA-256 of the JCS form of what this report lists"
}

// entriesAfter reads the log's entries from start on, a chunk at a time,
// up to size: where replay finds the outcomes of calls in its range that
// were recorded after it.
func entriesAfter(read func(ctx context.Context, start, end uint64) ([][]byte, error), size uint64) func(context.Context, uint64) ([][]byte, error) {
	return func(ctx context.Context, start uint64) ([][]byte, error) {
		if start >= size {
			return nil, nil
		}
		return read(ctx, start, min(start+256, size))
	}
}

// Package replay re-runs recorded tools/call entries against the live
// downstream servers and classifies each call (issue 7, "Replay";
// research/provenance.md §3.2): unchanged, changed (with the data release
// then and now), flaky (fresh runs disagree with each other, Diffy-style
// noise estimation), or not replayable (with the reason). Each call's
// outcome also says whether its server still lists the tool with the
// definition the call was made against (definition.go).
//
// Only tools that cannot change anything are re-run: a server whose config
// says replay: true, or a tool whose downstream annotations say
// readOnlyHint, unless its definition changed since the call
// (definition.go). Calls whose recorded arguments were redacted, or moved to
// a blob that is gone or no longer hashes to its name, are not
// replayable: replay would not send what the original call sent.
//
// Result hashing: replay connects to a server as the proxy does
// (proxy.Dial: the same transports, the protocol revision of the session
// the proxy sent the call to, by the call entry's protocol_version) and
// reads fresh results off the wire as the proxy does, and hashes them by
// the proxy's rule ([log.ResultSum]): the SHA-256 of the RFC 8785 form of the
// bytes the server sent or, for a result that is not I-JSON (a lone
// surrogate, a duplicate key) or holds a number that form writes as
// another (beyond ±2^53), of those bytes as received, exactly what the
// call.result entry holds (result_canonical: false). Against an entry
// without that marker, a fresh result holding such numbers is compared in
// its JCS form, as provlog hashed such results before (asDoubles). A
// retained result (retain: full) is kept in that same form and compared
// member by member; where decoding cannot show a difference (it reads a
// lone surrogate as U+FFFD and keeps the last of duplicate keys), the
// hashes decide. A result kept scrubbed of redacted values
// (result_retained_sha256) is not the result as received: the hashes
// decide, and the scrubbed copy only names where a changed result
// differs.
package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
	"github.com/provlog/provlog/proxy/source"
)

// Classes of a replayed call.
const (
	Unchanged     = "unchanged"
	Changed       = "changed"
	Flaky         = "flaky"
	NotReplayable = "not_replayable"
	// Failed: the call was replayable but a fresh run failed (protocol
	// error, timeout, server down).
	Failed = "failed"
)

// Classes lists the classes in report order.
var Classes = []string{Unchanged, Changed, Flaky, NotReplayable, Failed}

// DefaultRuns is how often each call is re-run by default.
const DefaultRuns = 3

// maxPaths bounds the JSON paths named per call.
const maxPaths = 20

// A BlobReader reads a data dir's blobs, checked against their names
// (the hex SHA-256 of their bytes), and says whether it holds one: a blob
// it does not hold (purged, or lost) is not one whose bytes cannot be
// read or no longer hash to its name. *blobs.Store implements it.
type BlobReader interface {
	Get(sum string) ([]byte, error)
	Has(sum string) (bool, error)
}

// Options configure a replay run.
type Options struct {
	// Servers are the downstream servers, as in the proxy's config.
	Servers []proxy.ServerConfig
	// Blobs is the data dir's blob store (retained results, arguments
	// moved out of big entries); nil when reading a remote log.
	Blobs BlobReader
	// Runs is how often each call is re-run (DefaultRuns when < 1). With
	// 1 there is no flakiness check: a flaky tool looks changed.
	Runs int
	// HTTPClient is for release resolvers (nil: http.DefaultClient).
	HTTPClient *http.Client
	Logger     *slog.Logger
	Version    string
	// After, if set, reads the log's entries from index start on (a
	// chunk of them; none at the log's end), so that the outcome of a
	// call in the range recorded after the range is found.
	After func(ctx context.Context, start uint64) ([][]byte, error)
}

// An Outcome is one call's classification.
type Outcome struct {
	Index  uint64 `json:"index"`
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Class  string `json:"class"`
	Reason string `json:"reason,omitempty"`
	// Paths are RFC 6901 pointers into the result: for flaky, where the
	// fresh runs disagree; for changed, where fresh and recorded differ
	// (only when the recorded result was retained).
	Paths []string `json:"paths,omitempty"`
	// ReleaseThen is the call entry's release; ReleaseNow is resolved
	// now, for servers with a source: resolver.
	ReleaseThen string `json:"release_then,omitempty"`
	ReleaseNow  string `json:"release_now,omitempty"`
	// SameRelease flags a changed result under an unchanged release:
	// suspicious (unversioned change, or a resolver that lags).
	SameRelease bool `json:"same_release,omitempty"`
	// HashOnly says the recorded result was not retained, or its blob
	// could not be read (Note says which), so only its hash could be
	// compared (and an ignore list could not be applied).
	HashOnly bool   `json:"hash_only,omitempty"`
	Note     string `json:"note,omitempty"`
	// Definition compares the tool's definition the call was made against
	// (the call entry's tool_sha256, ToolThen) with the one the server
	// lists now (ToolNow): DefinitionSame, DefinitionChanged,
	// DefinitionGone (the tool is no longer listed) or DefinitionUnknown
	// (definition.go). Empty when it could not be compared: the server is
	// not in the config or cannot be reached (Note says so).
	Definition string `json:"definition,omitempty"`
	ToolThen   string `json:"tool_sha256_then,omitempty"`
	ToolNow    string `json:"tool_sha256_now,omitempty"`
}

// A Report is a replay run's result.
type Report struct {
	From   uint64         `json:"from"`
	To     uint64         `json:"to"` // exclusive
	Runs   int            `json:"runs"`
	Counts map[string]int `json:"counts"`
	// Definitions counts the outcomes by Definition; a call whose tool's
	// definition could not be compared is not counted.
	Definitions map[string]int `json:"definitions"`
	Outcomes    []Outcome      `json:"outcomes"`
}

// Run replays the call entries among entries, which are the log's entries
// [from, from+len(entries)). Other kinds are skipped.
func Run(ctx context.Context, entries [][]byte, from uint64, opts Options) (*Report, error) {
	if opts.Runs < 1 {
		opts.Runs = DefaultRuns
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &runner{opts: opts, conns: map[connKey]*conn{}}
	defer r.close()
	rep := &Report{From: from, To: from + uint64(len(entries)), Runs: opts.Runs, Counts: map[string]int{}, Definitions: map[string]int{}}
	for _, c := range Classes {
		rep.Counts[c] = 0
	}
	for _, d := range Definitions {
		rep.Definitions[d] = 0
	}
	// A call's outcome is its call.result entry, later in the log (or, in
	// logs before call.result, in the call entry itself).
	calls, at, err := pairCalls(ctx, entries, from, opts.After)
	if err != nil {
		return nil, err
	}
	for k, c := range calls {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o := r.replay(ctx, at[k], c)
		rep.Counts[o.Class]++
		if o.Definition != "" {
			rep.Definitions[o.Definition]++
		}
		rep.Outcomes = append(rep.Outcomes, o)
	}
	return rep, nil
}

// pairCalls returns the calls among entries (the log's from, from+1...)
// and their indices, each with its outcome if the log has it: from its
// call.result entry, within entries or read with after, or from a call
// entry of an old log.
func pairCalls(ctx context.Context, entries [][]byte, from uint64, after func(context.Context, uint64) ([][]byte, error)) ([]*log.CallEntry, []uint64, error) {
	var calls []*log.CallEntry
	var at []uint64
	pos := map[uint64]int{}      // call index -> its place in calls
	waiting := map[uint64]bool{} // calls without an outcome yet
	take := func(index uint64, b []byte, inRange bool) error {
		e, err := log.ParseEntry(b)
		if err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
		switch {
		case e.Kind == log.KindCall && inRange:
			c, err := log.ParseCall(e)
			if err != nil {
				return fmt.Errorf("entry %d: %w", index, err)
			}
			pos[index] = len(calls)
			calls, at = append(calls, c), append(at, index)
			if c.Outcome == nil {
				waiting[index] = true
			}
		case e.Kind == log.KindCallResult:
			res, err := log.ParseCallResult(e)
			if err != nil {
				return fmt.Errorf("entry %d: %w", index, err)
			}
			if waiting[res.Call] {
				calls[pos[res.Call]].Outcome = res
				delete(waiting, res.Call)
			}
		}
		return nil
	}
	for i, b := range entries {
		if err := take(from+uint64(i), b, true); err != nil {
			return nil, nil, err
		}
	}
	next := from + uint64(len(entries))
	for after != nil && len(waiting) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		more, err := after(ctx, next)
		if err != nil {
			return nil, nil, fmt.Errorf("reading entries after the range: %w", err)
		}
		if len(more) == 0 {
			break
		}
		for _, b := range more {
			if err := take(next, b, false); err != nil {
				return nil, nil, err
			}
			next++
		}
	}
	return calls, at, nil
}

type runner struct {
	opts  Options
	conns map[connKey]*conn
}

// connKey names a session: a server's, in the revision the proxy speaks
// to it for some clients (proxy.ServerConfig.Revision).
type connKey struct{ server, revision string }

// conn is one live session to a downstream server.
type conn struct {
	cs       *proxy.Conn
	err      error
	tools    map[string]proxy.ListedTool // by name, as listed now
	resolver *source.Resolver
}

func (r *runner) close() {
	for _, c := range r.conns {
		if c.cs != nil {
			c.cs.Close()
		}
	}
}

func (r *runner) server(id string) *proxy.ServerConfig {
	for i := range r.opts.Servers {
		if r.opts.Servers[i].ID == id {
			return &r.opts.Servers[i]
		}
	}
	return nil
}

// replay compares the definition of the tool the call entry at index
// called, and classifies the call by its result. The definition comes
// first: whether the tool is safe to re-run depends on it.
func (r *runner) replay(ctx context.Context, index uint64, call *log.CallEntry) Outcome {
	o := Outcome{Index: index, Server: call.Server, Tool: call.Tool}
	err := r.compareDefinition(ctx, &o, call)
	o = r.rerun(ctx, o, call)
	if err != nil && !strings.Contains(o.Reason, err.Error()) {
		o.Note = joinNote(o.Note, "tool definition not compared: connecting failed: "+err.Error())
	}
	return o
}

// rerun classifies the call by its result, re-running it if it is
// replayable; o holds its tool's definition compared.
func (r *runner) rerun(ctx context.Context, o Outcome, call *log.CallEntry) Outcome {
	no := func(format string, args ...any) Outcome {
		o.Class, o.Reason = NotReplayable, fmt.Sprintf(format, args...)
		return o
	}
	if strings.Contains(o.Tool, proxy.Redacted) {
		return no("the recorded tool name holds %q, the proxy's mark of a redacted value cut out of it (the server named the tool after a value the actor sent): the tool called cannot be named, so the call cannot be replayed", proxy.Redacted)
	}
	res := call.Outcome
	if res == nil {
		return no("no outcome of the call is recorded in the range (cut off by a crash, or recorded after it)")
	}
	if call.Continues != 0 || call.InputResponsesSHA256 != "" {
		return no("a later leg of a call that asked the client for input (continues %d): the log holds only the hash of the client's answers it carried", call.Continues)
	}
	o.ReleaseThen = res.DataRelease
	cfg := r.server(o.Server)
	if cfg == nil {
		return no("server %q is not in the config", o.Server)
	}
	if res.ResultSHA256 == "" {
		return no("the recorded call has no result (failed call): nothing to compare")
	}
	args, err := r.args(call)
	if err != nil {
		return no("%v", err)
	}
	if hasRedacted(args) {
		return no("the recorded arguments hold %q (in a value, whole or in part, or in a member name), the proxy's mark of a redacted value cut out of them: they may not be what the call sent", proxy.Redacted)
	}
	c := r.connect(ctx, cfg, call.ProtocolVersion)
	if c.err != nil {
		if !cfg.Replay {
			return no("cannot tell whether %s is safe to replay: connecting failed: %v", o.Tool, c.err)
		}
		o.Class, o.Reason = Failed, "connecting: "+c.err.Error()
		return o
	}
	tool, listed := c.tools[o.Tool]
	if !listed {
		// Calling it would only get "unknown tool", which compared with
		// the record read as a changed result.
		return no("tool %q is no longer listed by the server", o.Tool)
	}
	switch {
	case cfg.Replay:
	case !tool.ReadOnly:
		return no("tool not marked safe to replay (no replay: true, not annotated readOnlyHint)")
	case o.Definition == DefinitionChanged:
		// The annotation is the new definition's word: the tool the call
		// was made against may not have been read-only (a rug pull).
		return no("tool's definition changed since the call: its readOnlyHint now is not the word of the definition the call was made against (no replay: true)")
	case o.Definition == DefinitionUnknown:
		// An entry from before tool_sha256: nothing says the tool was
		// read-only when it was called.
		return no("the call entry names no tool definition (recorded before provlog named them): its readOnlyHint now may not be the word of the definition the call was made against (no replay: true)")
	}
	ignore := append(append([]string(nil), cfg.ReplayIgnore["*"]...), cfg.ReplayIgnore[o.Tool]...)

	fresh, err := r.runs(ctx, c, cfg, o.Tool, args, ignore)
	if err != nil {
		o.Class, o.Reason = Failed, err.Error()
		return o
	}
	if paths, apart := disagree(fresh, ignore); len(paths) > 0 || apart {
		o.Class, o.Paths = Flaky, cap20(paths)
		o.Reason = fmt.Sprintf("%d fresh runs disagree with each other", r.opts.Runs)
		if len(paths) == 0 {
			o.Reason += " " + unseen
		}
		return o
	}
	if r.compare(&o, res, fresh[0], ignore) {
		o.Class = Unchanged
		return o
	}
	o.Class = Changed
	if r.opts.Runs == 1 {
		o.Reason = "fresh result differs from the record (single run: flakiness not checked)"
	} else {
		o.Reason = fmt.Sprintf("%d fresh runs agree with each other but differ from the record", r.opts.Runs)
	}
	if c.resolver != nil {
		o.ReleaseNow = c.resolver.Resolve(ctx, fresh[0].hashed)
		if o.ReleaseNow != "" && o.ReleaseNow == o.ReleaseThen {
			o.SameRelease = true
		}
	}
	return o
}

// args returns the recorded call's arguments, from the entry or from the
// blob they were moved to; the error says why they cannot be had.
func (r *runner) args(call *log.CallEntry) (any, error) {
	if call.Args != nil {
		args, err := decode(call.Args)
		if err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		return args, nil
	}
	sum := call.ArgsSHA256
	if sum == "" {
		return nil, nil
	}
	b, err := r.blob(sum)
	if err != nil {
		return nil, fmt.Errorf("arguments were moved to %v", err)
	}
	args, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("arguments blob %s: %v", short(sum), err)
	}
	return args, nil
}

// blob returns the blob named sum; the error says why it cannot be had,
// starting "blob <name>, ...": a blob store that does not hold it
// (purged, or lost) is not one whose copy no longer hashes to its name,
// which is named as such, since a purge is routine and a changed blob is
// not.
func (r *runner) blob(sum string) ([]byte, error) {
	if r.opts.Blobs == nil {
		return nil, fmt.Errorf("blob %s, and blobs are not readable from a remote log", short(sum))
	}
	b, err := r.opts.Blobs.Get(sum)
	if err == nil {
		return b, nil
	}
	held, herr := r.opts.Blobs.Has(sum)
	switch {
	case herr != nil:
		return nil, fmt.Errorf("blob %s, which cannot be read or looked up: %v; %v", short(sum), err, herr)
	case held:
		// Held, so Get's error is about its bytes: unreadable, or no
		// longer hashing to its name.
		return nil, fmt.Errorf("blob %s, which cannot be read: %v", short(sum), err)
	}
	return nil, fmt.Errorf("blob %s, which the data dir does not hold (purged, or lost): %v", short(sum), err)
}

// A freshResult is one fresh run's result.
type freshResult struct {
	v        any    // decoded, the ignore list applied
	hashed   []byte // what log.ResultSum hashed, nothing ignored
	sum      string // its hash, as a call.result entry would name it
	received bool   // hashed as received (result_canonical: false)
}

// unseen explains results whose hashes differ where no path does.
const unseen = "only where JSON decoding cannot show it (the results are not I-JSON: a lone surrogate, a duplicate key), so no path is named"

// runs calls tool afresh opts.Runs times and returns the results.
func (r *runner) runs(ctx context.Context, c *conn, cfg *proxy.ServerConfig, tool string, args any, ignore []string) ([]freshResult, error) {
	timeout := time.Duration(cfg.Timeout)
	if timeout <= 0 {
		timeout = proxy.DefaultTimeout
	}
	var fresh []freshResult
	for run := 0; run < r.opts.Runs; run++ {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		raw, err := c.cs.CallTool(cctx, tool, args)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("run %d: %v", run+1, err)
		}
		// The wire bytes, hashed as the proxy hashed the recorded
		// result: a result that is not I-JSON was recorded by the hash
		// of its bytes as received, and only those bytes match it.
		f := freshResult{}
		f.sum, f.hashed, f.received = log.ResultSum(raw, nil)
		v, err := decode(f.hashed)
		if err != nil {
			return nil, fmt.Errorf("run %d: %v", run+1, err)
		}
		f.v = applyIgnore(v, ignore)
		fresh = append(fresh, f)
	}
	return fresh, nil
}

// disagree returns the paths at which the fresh runs differ from the
// first, and whether their hashes differ where no path shows it (only
// without an ignore list, whose removals hashes cannot see).
func disagree(fresh []freshResult, ignore []string) (paths []string, apart bool) {
	for _, f := range fresh[1:] {
		paths = union(paths, diff("", fresh[0].v, f.v, false))
		apart = apart || (len(ignore) == 0 && f.sum != fresh[0].sum)
	}
	return paths, apart
}

// compare reports whether the first fresh result is the recorded one:
// path by path against the retained result if there is one as received,
// else by hash (noted in o).
func (r *runner) compare(o *Outcome, res *log.CallResultEntry, fresh freshResult, ignore []string) bool {
	if jcs, ok := asDoubles(res, fresh, ignore); ok {
		fresh = jcs
		defer func() { o.Note = strings.TrimPrefix(o.Note+"; "+doublesNote, "; ") }()
	}
	rec, why := r.retained(res)
	if why == "" && res.RetainedSHA256 != "" {
		// The blob is the result scrubbed of redacted values, not the
		// result as received, which only result_sha256 names: the hashes
		// decide, and the blob only names where the results differ
		// (its "[redacted]" stands for a value the fresh result holds).
		o.Note = "recorded result retained scrubbed of redacted values (result_retained_sha256): compared by hash"
		if len(ignore) > 0 {
			o.Note += ", ignore list not applied"
		}
		if fresh.sum == res.ResultSHA256 {
			return true
		}
		o.Paths = cap20(diff("", applyIgnore(rec, ignore), fresh.v, true))
		o.Note += "; paths named from the scrubbed copy"
		return false
	}
	if why == "" {
		paths := diff("", applyIgnore(rec, ignore), fresh.v, true)
		o.Paths = cap20(paths)
		if len(paths) > 0 {
			return false
		}
		if len(ignore) > 0 || fresh.sum == res.ResultSHA256 {
			return true
		}
		o.Note = "differs from the record " + unseen
		return false
	}
	o.HashOnly = true
	o.Note = why + ": compared hashes only"
	if len(ignore) > 0 {
		o.Note += ", ignore list not applied"
	}
	return fresh.sum == res.ResultSHA256
}

// retained returns the recorded result kept as a blob, decoded, or why it
// cannot be had: not retained, or retained in a blob that is gone,
// changed or out of reach (blob).
func (r *runner) retained(res *log.CallResultEntry) (any, string) {
	sum := res.RetainedBlob()
	if sum == "" {
		return nil, "recorded result not retained"
	}
	b, err := r.blob(sum)
	if err != nil {
		return nil, fmt.Sprintf("recorded result retained as %v", err)
	}
	rec, err := decode(b)
	if err != nil {
		return nil, fmt.Sprintf("recorded result retained as blob %s, which does not decode: %v", short(sum), err)
	}
	return rec, ""
}

// doublesNote says a fresh result was compared in the JCS form its
// record was hashed in (asDoubles).
const doublesNote = "the fresh result holds numbers JCS writes as doubles (beyond ±2^53, or underflowing to 0), and the record is of a JCS form (as provlog wrote such results before hashing them as received): compared as doubles"

// asDoubles returns fresh in its JCS form, and true, when log.ResultSum
// hashed it as received only for its numbers (log.ExactNumbers) while the
// record is of a JCS form: an entry written before such results were
// hashed as received, or one of a result that held no such numbers.
// Such an entry names no wire bytes; in the form it was hashed in, fresh
// matches it where the numbers are alike as doubles, all that such an
// entry can say.
func asDoubles(res *log.CallResultEntry, fresh freshResult, ignore []string) (freshResult, bool) {
	if res.ResultRaw || !fresh.received {
		return fresh, false
	}
	canon, err := log.Canonicalize(fresh.hashed)
	if err != nil {
		return fresh, false // not I-JSON: it has no JCS form
	}
	v, err := decode(canon)
	if err != nil {
		return fresh, false
	}
	sum := sha256.Sum256(canon)
	return freshResult{v: applyIgnore(v, ignore), hashed: canon, sum: hex.EncodeToString(sum[:])}, true
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// connect opens (once per server and revision) the session the proxy
// sends a call of a client of revision protocol to, as the proxy opens it,
// and lists the tools as the proxy does, for their annotations and
// definitions: a stdio server's second session, for 2026-07-28 clients,
// answers and lists in that revision.
func (r *runner) connect(ctx context.Context, cfg *proxy.ServerConfig, protocol string) *conn {
	key := connKey{cfg.ID, cfg.Revision(protocol)}
	if c, ok := r.conns[key]; ok {
		return c
	}
	c := &conn{tools: map[string]proxy.ListedTool{}}
	r.conns[key] = c
	if cfg.Source != nil {
		c.resolver, _ = source.New(*cfg.Source, r.opts.HTTPClient, r.opts.Logger)
	}
	cs, err := proxy.Dial(ctx, *cfg, protocol, "provlog-replay", r.opts.Version, r.opts.Logger)
	if err != nil {
		c.err = err
		return c
	}
	c.cs = cs
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tools, err := cs.Tools(cctx)
	if err != nil {
		c.err = fmt.Errorf("listing tools: %w", err)
		return c
	}
	for _, t := range tools {
		c.tools[t.Name] = t
	}
	return c
}

// hasRedacted reports whether the redaction mark occurs anywhere in v:
// in a string, whole or in part, or in a member name. The proxy puts it
// in place of a redacted field's value, of a redacted value quoted in
// another string (scrubText) and of one in a member name (scrubMembers),
// so any of them means the arguments are not what the call sent.
func hasRedacted(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, proxy.Redacted)
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, proxy.Redacted) || hasRedacted(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasRedacted(e) {
				return true
			}
		}
	}
	return false
}

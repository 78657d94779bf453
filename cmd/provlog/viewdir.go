package main

// `provlog view DIR`: the auditor's view of an export bundle or an evidence
// directory, offline. A loopback HTTP server serves the page
// (log/server/ui) and, in the shape the page reads from a sidecar, the
// directory's data: its checkpoint, its entries, their inclusion proofs
// (a bundle's computed from its entries and tree.json, an evidence's as it
// holds them), its anchor records and the histories of its tasks. Nothing
// is checked here: the page does the checking, so a changed byte in the
// directory shows there. Every file is read once, at the start, through an
// os.Root of the directory: a symbolic link out of it is an error, as for
// verify-bundle, not a way to show the auditor another file.

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/log/server/ui"
	"github.com/provlog/provlog/opp"
)

func runView(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("view", stderr)
	addr := fs.String("http", "127.0.0.1:0", "loopback address to serve the page on")
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("give the directory of a bundle or an evidence: provlog view DIR")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usageErr("--http %q: %v", *addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErr("--http %q: provlog view serves on loopback only (127.0.0.1, [::1] or localhost)", *addr)
	}
	v, err := openView(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: v.handler(ln.Addr().String()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	// The origin is the directory's, unchecked: escaped, so that it cannot
	// act on the terminal (an OSC 8 link over the address after it).
	what := log.Printable(fmt.Sprintf("auditor's view of %s (%s of %s at size %d)", fs.Arg(0), v.held(), v.origin, v.size))
	fmt.Fprintf(stdout, "%s: http://%s/ui/\n", what, ln.Addr())
	// The view logs nothing: what it has to say is on the page.
	return cli.Serve(ctx, srv, ln, slog.New(slog.DiscardHandler), "provlog view")
}

// view is a bundle or an evidence directory loaded for the page.
type view struct {
	root       *os.Root // the directory, while it is read
	source     string   // "bundle" or "evidence", as ui.Info.Source
	origin     string
	vkey       string
	witnesses  []string
	checkpoint []byte
	size, from uint64
	// entries [from, end) are a bundle's, proven from tree, read from its
	// provenance.jsonl when asked for (nil for an evidence); given entries
	// carry their own receipts (a bundle's genesis entry, an evidence's
	// entries).
	entries *bundle.Entries
	tree    *bundleTree
	given   map[uint64]givenEntry
	byLeaf  map[string]uint64 // the given entries' leaf hashes
	anchors http.Handler      // nil without anchors
	// tasks are the tasks rebuilt from the entries held, each read back
	// from them when asked for; nil, with noTasks saying why, when they
	// cannot be.
	tasks   *opp.Tasks
	noTasks string
	missing []string // what the directory says it lacks
}

// givenEntry is an entry with the receipt its directory holds for it.
type givenEntry struct {
	entry, receipt []byte
}

// openView loads dir, an export bundle or an evidence directory, by its
// manifest's format.
func openView(ctx context.Context, dir string) (*view, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (provlog view opens a directory that provlog export or provlog evidence wrote)", err)
	}
	defer root.Close()
	mb, err := root.ReadFile(bundle.ManifestFile)
	if err != nil {
		return nil, fmt.Errorf("%w (provlog view opens a directory that provlog export or provlog evidence wrote)", err)
	}
	var m struct {
		Format string `json:"format"`
	}
	json.Unmarshal(mb, &m)
	switch m.Format {
	case bundle.Format:
		return openBundleView(ctx, root, mb)
	case evidence.Format:
		return openEvidenceView(ctx, root, mb)
	}
	return nil, fmt.Errorf("%s is neither a %s nor a %s manifest", filepath.Join(dir, bundle.ManifestFile), bundle.Format, evidence.Format)
}

// readIn reads a file of root, saying which in its error.
func readIn(root *os.Root, name string) ([]byte, error) {
	b, err := root.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return b, nil
}

// readKeys reads the log's verifier key, the witnesses' keys (lines with
// a key; an evidence's witnesses.txt starts with its threshold) and the
// checkpoint, which both directory kinds keep under the same names.
func (v *view) readKeys() error {
	vk, err := readIn(v.root, bundle.VKeyFile)
	if err != nil {
		return err
	}
	v.vkey = strings.TrimSpace(string(vk))
	if w, err := v.root.ReadFile(bundle.WitnessesFile); err == nil {
		for _, l := range strings.Split(string(w), "\n") {
			if l = strings.TrimSpace(l); strings.Contains(l, "+") {
				v.witnesses = append(v.witnesses, l)
			}
		}
	}
	if v.checkpoint, err = readIn(v.root, bundle.CheckpointFile); err != nil {
		return err
	}
	cp, err := log.ParseCheckpointNote(v.checkpoint)
	if err != nil {
		return fmt.Errorf("the checkpoint: %w", err)
	}
	v.origin, v.size = cp.Origin, cp.Size
	return nil
}

// rebuildTasks rebuilds the tasks of the entries below end from read.
func (v *view) rebuildTasks(ctx context.Context, r opp.EntryReader, end uint64) error {
	tasks, err := opp.Rebuild(ctx, r, end)
	if err != nil {
		return fmt.Errorf("rebuilding the tasks: %w", err)
	}
	v.tasks = tasks
	return nil
}

func openBundleView(ctx context.Context, root *os.Root, mb []byte) (*view, error) {
	var m bundle.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", bundle.ManifestFile, err)
	}
	v := &view{root: root, source: "bundle", from: m.From, byLeaf: map[string]uint64{}, given: map[uint64]givenEntry{}}
	if err := v.readKeys(); err != nil {
		return nil, err
	}
	// The entries are indexed, not held: the page asks for a few.
	f, err := root.Open(bundle.EntriesFile)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", bundle.EntriesFile, err)
	}
	if v.entries, err = bundle.IndexEntries(f, v.from); err != nil {
		return nil, err
	}
	to := v.entries.End()
	if to > v.size {
		v.entries.Close()
		return nil, fmt.Errorf("the bundle holds entries up to %d, past its checkpoint's size %d", to, v.size)
	}
	tb, err := readIn(root, bundle.TreeFile)
	if err != nil {
		return nil, err
	}
	var t bundle.Tree
	if err := json.Unmarshal(tb, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", bundle.TreeFile, err)
	}
	if v.tree, err = newBundleTree(v.from, to, v.size, v.entries.Leaves(), t); err != nil {
		return nil, err
	}
	if v.from > 0 {
		if err := v.bundleGenesis(); err != nil {
			return nil, err
		}
		v.noTasks = fmt.Sprintf("the bundle starts at entry %d, and a task's history needs the log from entry 0", v.from)
	} else if err := v.rebuildTasks(ctx, v.entries, to); err != nil {
		return nil, err
	}
	records, err := bundleAnchors(root)
	if err != nil {
		return nil, err
	}
	if len(records) > 0 {
		v.anchors = anchorListing(records)
	}
	return v, nil
}

// bundleGenesis reads entry 0 and its proof (genesis.entry and
// genesis.proof, one base64 hash a line) into a receipt.
func (v *view) bundleGenesis() error {
	g, err := readIn(v.root, bundle.GenesisFile)
	if err != nil {
		return err
	}
	gp, err := readIn(v.root, bundle.GenesisProof)
	if err != nil {
		return err
	}
	var proof [][]byte
	for _, l := range strings.Fields(string(gp)) {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil {
			return fmt.Errorf("%s: %q is not a base64 hash", bundle.GenesisProof, l)
		}
		proof = append(proof, h)
	}
	rc := &log.Receipt{Extra: log.LeafHash(g), Index: 0, Proof: proof, Checkpoint: v.checkpoint}
	v.given[0] = givenEntry{entry: g, receipt: []byte(rc.String())}
	return nil
}

// entry returns entry i, if the directory holds it.
func (v *view) entry(i uint64) ([]byte, bool) {
	if g, ok := v.given[i]; ok {
		return g.entry, true
	}
	if v.entries == nil || i < v.entries.From() || i >= v.entries.End() {
		return nil, false
	}
	es, err := v.entries.Entries(context.Background(), i, i+1)
	if err != nil {
		return nil, false
	}
	return es[0], true
}

// held says which entries the directory holds, for not-found answers.
func (v *view) held() string {
	var parts []string
	if v.entries != nil && v.entries.End() > v.from {
		parts = append(parts, fmt.Sprintf("[%d, %d)", v.from, v.entries.End()))
	}
	for _, i := range slices.Sorted(maps.Keys(v.given)) {
		parts = append(parts, strconv.FormatUint(i, 10))
	}
	return "the " + v.source + " holds entries " + strings.Join(parts, ", ")
}

// handler serves the page and the paths it reads. host is the address the
// server listens on: other Host headers are refused (DNS rebinding).
func (v *view) handler(host string) http.Handler {
	mux := http.NewServeMux()
	page := ui.Handler(ui.Info{VKey: v.vkey, Witnesses: v.witnesses, Source: v.source, Missing: v.missing})
	mux.Handle("/ui", page)
	mux.Handle("/ui/", page)
	mux.HandleFunc("GET /log/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(v.checkpoint)
	})
	mux.HandleFunc("GET /log/entry/{n}", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.ParseUint(r.PathValue("n"), 10, 64)
		e, ok := v.entry(i)
		if err != nil || !ok {
			http.Error(w, v.held(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(e)
	})
	mux.HandleFunc("GET /log/proof/inclusion", v.inclusion)
	mux.HandleFunc("GET /log/proof/consistency", v.consistency)
	if v.anchors != nil {
		mux.Handle("/log/anchors", v.anchors)
		mux.Handle("/log/anchors/", v.anchors)
	}
	mux.Handle("/log/task/", ui.TaskHandler(v.task, nil))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != host && r.Host != strings.Replace(host, "127.0.0.1", "localhost", 1) {
			http.Error(w, "provlog view answers only requests for "+host, http.StatusMisdirectedRequest)
			return
		}
		// The directory's bytes are data, never a page of this origin.
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox")
		mux.ServeHTTP(w, r)
	})
}

func (v *view) task(ctx context.Context, id string) (any, error) {
	if v.tasks == nil {
		return nil, fmt.Errorf("%w: %s", ui.ErrNoTask, v.noTasks)
	}
	t, err := v.tasks.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%w: the %s holds no task %s", ui.ErrNoTask, v.source, id)
	}
	return t, nil
}

// inclusion answers ?index=N or ?hash=HEX with a receipt for the bundle's
// checkpoint.
func (v *view) inclusion(w http.ResponseWriter, r *http.Request) {
	req, cose, err := server.ParseInclusionQuery(r.URL.Query())
	if err == nil && cose {
		err = errors.New("format=cose: the " + v.source + " answers tlog-proof receipts only")
	}
	if err != nil {
		http.Error(w, "bad query: "+err.Error(), http.StatusBadRequest)
		return
	}
	index := req.Index
	if req.LeafHash != nil {
		i, ok := v.byLeaf[string(req.LeafHash)]
		if !ok && v.entries != nil {
			i, ok = v.entries.Find(req.LeafHash)
		}
		if !ok {
			http.Error(w, "the "+v.source+" holds no entry with leaf hash "+hex.EncodeToString(req.LeafHash), http.StatusNotFound)
			return
		}
		index = i
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if g, ok := v.given[index]; ok {
		w.Write(g.receipt)
		return
	}
	e, ok := v.entry(index)
	if !ok {
		http.Error(w, v.held(), http.StatusNotFound)
		return
	}
	rc, err := log.ProveReceipt(r.Context(), v.tree, index, v.size, log.LeafHash(e), v.checkpoint)
	if err != nil {
		http.Error(w, "proving inclusion from the bundle's tree: "+err.Error(), http.StatusInternalServerError)
		return
	}
	io.WriteString(w, rc.String())
}

// consistency answers ?old=A[&new=B] (B defaults to, and may not pass,
// the checkpoint's size) with the RFC 6962 consistency proof, one base64
// hash a line, made from the nodes the bundle holds: its entries and
// tree.json's compact ranges reach every proof from a size within its
// entries, and some others. A proof needing a node they do not reach is
// a 404 naming it and what the bundle holds.
func (v *view) consistency(w http.ResponseWriter, r *http.Request) {
	old, newSize, hasNew, err := server.ParseConsistencyQuery(r.URL.Query())
	if err != nil {
		http.Error(w, "bad query: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !hasNew {
		newSize = v.size
	}
	switch {
	case old > newSize:
		http.Error(w, fmt.Sprintf("bad query: old size %d is above new size %d", old, newSize), http.StatusBadRequest)
		return
	case newSize > v.size:
		http.Error(w, fmt.Sprintf("new size %d is above the %s's checkpoint's size %d", newSize, v.source, v.size), http.StatusNotFound)
		return
	case v.tree == nil:
		http.Error(w, "the "+v.source+" holds receipts, not the tree's hashes: no consistency proof can be made from it", http.StatusNotFound)
		return
	}
	p, err := log.ProveConsistency(r.Context(), v.tree, old, newSize)
	if err != nil {
		http.Error(w, fmt.Sprintf("the bundle cannot prove consistency from size %d to %d: it holds the tree's hashes over its entries [%d, %d) and %s's compact ranges of [0, %d) and [%d, %d): %v",
			old, newSize, v.tree.from, v.tree.to, bundle.TreeFile, v.tree.from, v.tree.to, v.size, err), http.StatusNotFound)
		return
	}
	var b strings.Builder
	for _, h := range p {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, b.String())
}

// bundleTree reads the tree nodes an inclusion proof of an exported entry
// needs, from the exported entries [from, to) and the compact ranges of
// [0, from) and [to, size) that tree.json holds.
type bundleTree struct {
	from, to uint64
	// levels[l] holds the nodes at level l that lie inside [from, to),
	// starting at index starts[l], 32 bytes each.
	levels [][]byte
	starts []uint64
	known  map[compact.NodeID][]byte
}

// newBundleTree makes the tree of the entries [from, to) of a log of
// size, whose leaf hashes are leaves (32 bytes each), with t.
func newBundleTree(from, to, size uint64, leaves []byte, t bundle.Tree) (*bundleTree, error) {
	bt := &bundleTree{from: from, to: to, known: map[compact.NodeID][]byte{}}
	for _, side := range []struct {
		b, e   uint64
		hashes []string
	}{{0, from, t.Left}, {to, size, t.Right}} {
		ids := compact.RangeNodes(side.b, side.e, nil)
		if len(ids) != len(side.hashes) {
			return nil, fmt.Errorf("%s: %d hashes for [%d, %d), which has %d compact-range nodes", bundle.TreeFile, len(side.hashes), side.b, side.e, len(ids))
		}
		for i, id := range ids {
			h, err := base64.StdEncoding.DecodeString(side.hashes[i])
			if err != nil || len(h) != log.HashSize {
				return nil, fmt.Errorf("%s: hash %d of [%d, %d) is not a base64 SHA-256 hash", bundle.TreeFile, i, side.b, side.e)
			}
			bt.known[id] = h
		}
	}
	const hs = log.HashSize
	level, start := leaves, from
	for len(level) > 0 {
		bt.levels = append(bt.levels, level)
		bt.starts = append(bt.starts, start)
		// The parents inside [from, to): both children must be inside.
		ps := (start + 1) / 2
		n := uint64(len(level) / hs)
		var next []byte
		for p := ps; 2*p+1 < start+n; p++ {
			l, r := 2*p-start, 2*p+1-start
			next = append(next, rfc6962.DefaultHasher.HashChildren(level[hs*l:hs*(l+1)], level[hs*r:hs*(r+1)])...)
		}
		level, start = next, ps
	}
	return bt, nil
}

func (bt *bundleTree) ReadNodes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := bt.node(id)
		if !ok {
			return nil, fmt.Errorf("node (%d, %d) is neither over the bundle's entries nor made of %s's nodes: %w", id.Level, id.Index, bundle.TreeFile, log.ErrNotFound)
		}
		out[i] = h
	}
	return out, nil
}

// node returns a node over [from, to), a node of tree.json, or the hash of
// its two children. A proof node that straddles from or to is never
// inside a compact-range node (its parent would be inside too), so the
// descent ends at those nodes and at entries.
func (bt *bundleTree) node(id compact.NodeID) ([]byte, bool) {
	if l := int(id.Level); l < len(bt.levels) && id.Index >= bt.starts[l] && id.Index-bt.starts[l] < uint64(len(bt.levels[l])/log.HashSize) {
		k := id.Index - bt.starts[l]
		return bt.levels[l][log.HashSize*k : log.HashSize*(k+1)], true
	}
	if h, ok := bt.known[id]; ok {
		return h, true
	}
	if id.Level == 0 {
		return nil, false
	}
	l, ok := bt.node(compact.NewNodeID(id.Level-1, 2*id.Index))
	if !ok {
		return nil, false
	}
	r, ok := bt.node(compact.NewNodeID(id.Level-1, 2*id.Index+1))
	if !ok {
		return nil, false
	}
	return rfc6962.DefaultHasher.HashChildren(l, r), true
}

package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// AuditSource is what [Audit] reads. A [Storage] is one; a remote log's
// client can be one too, serving only its latest checkpoint.
type AuditSource interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
	Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error
}

// AuditReport says what an audit checked.
type AuditReport struct {
	Entries     uint64 // entries recomputed
	Checkpoints uint64 // checkpoints verified against the recomputed tree
	Nodes       uint64 // stored nodes compared with the recomputed ones
	Size        uint64 // size of the last checkpoint
	Calls       uint64 // call entries
	// OpenCalls are the indices of call entries without a call.result:
	// calls cut off by a crash or a kill, or still under way in a
	// running sidecar. Calls of old logs, one entry with the outcome,
	// are never open.
	OpenCalls []uint64
	// WitnessConflicts are the indices of witness.conflict entries: a
	// witness said it holds another history of this log.
	WitnessConflicts []uint64
	// UnlistedTools are the indices of call entries whose tool_sha256
	// names a definition no earlier tools entry of their server lists:
	// the definition the call was made against is not in the log.
	UnlistedTools []uint64
}

// problem is the error of an audit that found part wrong: a
// *[ProblemsError] with the one problem (an audit stops at the first).
func problem(part string, format string, args ...any) error {
	return &ProblemsError{What: "log", Problems: []Problem{{Part: part, Msg: fmt.Sprintf(format, args...)}}}
}

func entryProblem(i uint64, format string, args ...any) error {
	return problem(fmt.Sprintf("entry %d", i), format, args...)
}

func checkpointProblem(size uint64, format string, args ...any) error {
	return problem(fmt.Sprintf("checkpoint %d", size), format, args...)
}

// auditChunk is how many entries an audit reads at once.
const auditChunk = 4096

// Audit recomputes the log's tree from its entries and checks every
// checkpoint src serves: each is signed by v, names v's origin and has the
// root of the recomputed tree at its size, which also proves every pair of
// checkpoints consistent. Every entry must parse as an [Entry]; entry 0
// must be the genesis entry naming this origin and verifier key. When src
// is also a [NodeReader], every stored node is compared with the
// recomputed one, and when it is a [LeafChecker] or has a LeafIndex
// method, every entry is looked for in its leaf-hash index. The first
// problem found is returned as a *[ProblemsError] naming the entry
// ("entry N"), the checkpoint ("checkpoint SIZE") or the stored node; an
// error reading src is returned as it is, wrapped.
func Audit(ctx context.Context, src AuditSource, v note.Verifier, vkey string) (*AuditReport, error) {
	a := &auditor{ctx: ctx, src: src, v: v, vkey: vkey, rep: &AuditReport{}, tools: toolDefs{},
		rng: (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)}
	a.nodes, _ = src.(NodeReader)
	a.leaves, _ = src.(interface {
		LeafIndex(ctx context.Context, leafHash []byte) (uint64, error)
	})
	a.hasLeaf, _ = src.(LeafChecker)
	rep := a.rep
	err := src.Checkpoints(ctx, 0, a.checkCheckpoint)
	if err != nil {
		var pe *ProblemsError
		if errors.As(err, &pe) {
			return rep, err
		}
		return rep, fmt.Errorf("audit: reading checkpoints after entry %d: %w", a.rng.End(), err)
	}
	if rep.Checkpoints == 0 {
		return rep, problem("log", "the log has no checkpoint")
	}
	rep.Calls, rep.OpenCalls = a.calls.Calls(), a.calls.Open()
	return rep, nil
}

// auditor is one [Audit] under way: the tree recomputed so far and what
// the source offers beside entries and checkpoints.
type auditor struct {
	ctx   context.Context
	src   AuditSource
	v     note.Verifier
	vkey  string
	rep   *AuditReport
	rng   *compact.Range
	calls CallTracker
	// continued holds, for each call.result a later leg continues, the
	// index of that leg: one result is answered by one leg.
	continued map[uint64]uint64
	tools     toolDefs   // the definitions tools entries listed so far
	nodes     NodeReader // nil unless src stores nodes
	leaves    interface {
		LeafIndex(ctx context.Context, leafHash []byte) (uint64, error)
	} // nil unless src indexes leaf hashes
	hasLeaf LeafChecker // nil unless src checks its index entry by entry
}

// A LeafChecker is an [AuditSource] whose leaf-hash index is checked
// entry by entry: [Audit] asks it whether its index holds each entry at
// its own index, in place of looking the entry's leaf hash up, which for
// such a store costs more (logpebble's index is kept by chunk, and a
// look-up seeks each). An index that lacks an entry is a problem of that
// entry.
type LeafChecker interface {
	HasLeaf(ctx context.Context, leafHash []byte, index uint64) (bool, error)
}

// checkCheckpoint extends the tree to the checkpoint's size and checks the
// checkpoint against it.
func (a *auditor) checkCheckpoint(size uint64, msg []byte) error {
	if size < a.rng.End() {
		return checkpointProblem(size, "out of order, after checkpoint %d", a.rng.End())
	}
	if err := a.extend(size); err != nil {
		return err
	}
	c, _, err := OpenCheckpoint(msg, a.v)
	if err != nil {
		return checkpointProblem(size, "does not verify: %v", err)
	}
	if c.Size != size {
		return checkpointProblem(size, "stored for size %d, it says size %d", size, c.Size)
	}
	root := EmptyRoot()
	if size > 0 {
		if root, err = a.rng.GetRootHash(nil); err != nil {
			return fmt.Errorf("audit: computing the root at size %d: %w", size, err)
		}
	}
	if !bytes.Equal(root, c.Hash) {
		return checkpointProblem(size, "root %x is not the recomputed root %x", c.Hash, root)
	}
	a.rep.Checkpoints++
	a.rep.Size = size
	return nil
}

// extend reads entries up to size to, a chunk at a time, checks each and
// adds it to the tree, and compares the stored nodes with the recomputed
// ones.
func (a *auditor) extend(to uint64) error {
	for a.rng.End() < to {
		end := min(to, a.rng.End()+auditChunk)
		entries, err := a.src.Entries(a.ctx, a.rng.End(), end)
		if err != nil {
			return fmt.Errorf("audit: reading entries from %d: %w", a.rng.End(), err)
		}
		if uint64(len(entries)) != end-a.rng.End() {
			return fmt.Errorf("audit: reading entries from %d: %d entries, want %d", a.rng.End(), len(entries), end-a.rng.End())
		}
		var ids []compact.NodeID
		var want [][]byte
		visit := func(id compact.NodeID, h []byte) {
			ids = append(ids, id)
			want = append(want, h)
		}
		for _, e := range entries {
			if err := a.addEntry(e, visit); err != nil {
				return err
			}
		}
		if err := a.compareNodes(ids, want); err != nil {
			return err
		}
		a.rep.Entries += uint64(len(entries))
	}
	return nil
}

// addEntry checks the next entry, its call bookkeeping and its leaf
// hash's index, and appends it to the tree.
func (a *auditor) addEntry(e []byte, visit func(compact.NodeID, []byte)) error {
	i := a.rng.End()
	pe, err := checkEntry(i, e, a.v, a.vkey)
	if err != nil {
		return err
	}
	if err := a.calls.Add(i, pe); err != nil {
		return entryProblem(i, "%v", err)
	}
	switch pe.Kind {
	case KindWitnessConflict:
		a.rep.WitnessConflicts = append(a.rep.WitnessConflicts, i)
	case KindTools:
		if err := a.tools.add(pe); err != nil {
			return entryProblem(i, "%v", err)
		}
	case KindCall:
		if !a.tools.listed(pe) {
			a.rep.UnlistedTools = append(a.rep.UnlistedTools, i)
		}
	}
	if bytes.Contains(e, []byte(`"continues"`)) {
		var err error
		switch pe.Kind {
		case KindCall:
			err = a.checkContinues(i, pe)
		case KindResourceRead, KindPromptGet:
			err = a.checkReadContinues(i, pe)
		}
		if err != nil {
			return err
		}
	}
	lh := LeafHash(e)
	if a.hasLeaf != nil {
		ok, err := a.hasLeaf.HasLeaf(a.ctx, lh, i)
		if err != nil {
			return fmt.Errorf("audit: looking up the leaf hash of entry %d: %w", i, err)
		}
		if !ok {
			return entryProblem(i, "the leaf hash index has no entry for it")
		}
	} else if a.leaves != nil {
		j, err := a.leaves.LeafIndex(a.ctx, lh)
		if err != nil {
			return entryProblem(i, "the leaf hash index has no entry: %v", err)
		}
		if j != i {
			// Duplicates may map elsewhere: that entry must have the same hash.
			dup, err := a.src.Entries(a.ctx, j, j+1)
			if err != nil || len(dup) != 1 || !bytes.Equal(LeafHash(dup[0]), lh) {
				return entryProblem(i, "the leaf hash index points to %d, which holds another entry", j)
			}
		}
	}
	if err := a.rng.Append(lh, visit); err != nil {
		return fmt.Errorf("audit: extending the tree with entry %d: %w", i, err)
	}
	return nil
}

// compareNodes compares the stored nodes ids with the recomputed want,
// when the source stores nodes.
func (a *auditor) compareNodes(ids []compact.NodeID, want [][]byte) error {
	if a.nodes == nil || len(ids) == 0 {
		return nil
	}
	got, err := a.nodes.ReadNodes(a.ctx, ids)
	if err != nil {
		return fmt.Errorf("audit: reading stored nodes below %d: %w", a.rng.End(), err)
	}
	for k := range ids {
		if !bytes.Equal(got[k], want[k]) {
			return problem(fmt.Sprintf("node %d at level %d", ids[k].Index, ids[k].Level), "the stored node differs from the recomputed one")
		}
	}
	a.rep.Nodes += uint64(len(ids))
	return nil
}

// sidecarKinds are the kinds the sidecar writes on its own, always as
// GenesisActor (the genesis; tools definitions; anchors; witness
// conflicts; issuers' namespaces): one by another actor is none it wrote.
var sidecarKinds = map[string]bool{KindGenesis: true, KindTools: true, KindAnchor: true, KindWitnessConflict: true, KindNamespace: true}

// checkEntry checks that entry i parses, that entry 0 is this log's
// genesis, and that the sidecar's own kinds are by the sidecar.
func checkEntry(i uint64, b []byte, v note.Verifier, vkey string) (*Entry, error) {
	e, err := ParseEntry(b)
	if err != nil {
		return nil, entryProblem(i, "does not parse: %v", err)
	}
	if (i == 0) != (e.Kind == KindGenesis) {
		return nil, entryProblem(i, "genesis must be entry 0 and only entry 0")
	}
	if sidecarKinds[e.Kind] && e.Actor != GenesisActor {
		return nil, entryProblem(i, "a %s entry by actor %q: only the sidecar writes them, as %q", e.Kind, e.Actor, GenesisActor)
	}
	if i == 0 {
		g, err := ParseGenesis(e)
		if err != nil {
			return nil, entryProblem(0, "genesis does not parse: %v", err)
		}
		if g.Origin != v.Name() {
			return nil, entryProblem(0, "genesis origin %q is not %q", g.Origin, v.Name())
		}
		if vkey != "" && g.VKey != vkey {
			return nil, entryProblem(0, "genesis names another verifier key")
		}
	}
	return e, nil
}

// checkContinues checks a later leg of a call (MCP 2026-07-28's
// input_required rounds): the call.result its "continues" names must be
// the outcome of an earlier leg of the same call — same actor, server,
// tool, arguments and client — that answered with a result (an
// input_required result asks for the input this leg carries), and no
// other leg may continue it. The entries it names are read from the
// source again; later legs are rare.
func (a *auditor) checkContinues(i uint64, e *Entry) error {
	leg, err := ParseCall(e)
	if err != nil || leg.Continues == 0 {
		return nil // CallTracker.Add parsed it; 0 is a first leg
	}
	j := leg.Continues
	if prev, ok := a.continued[j]; ok {
		return entryProblem(i, "call %d continues call.result %d, which call %d continues already", i, j, prev)
	}
	re, err := a.entry(j)
	if err != nil {
		return err
	}
	if re.Kind != KindCallResult {
		return entryProblem(i, "call %d continues entry %d, a %q entry, not a call.result", i, j, re.Kind)
	}
	r, err := ParseCallResult(re)
	if err != nil {
		return entryProblem(i, "call %d continues entry %d, which does not parse: %v", i, j, err)
	}
	if r.IsError || r.Error != "" || r.ResultSHA256 == "" {
		return entryProblem(i, "call %d continues call.result %d, the outcome of a failed call, which asks for no input", i, j)
	}
	ce, err := a.entry(r.Call)
	if err != nil {
		return err
	}
	prev, err := ParseCall(ce)
	if err != nil {
		return entryProblem(i, "call %d continues call.result %d of entry %d, which is not a call: %v", i, j, r.Call, err)
	}
	if what := otherCall(prev, leg); what != "" {
		return entryProblem(i, "call %d continues call.result %d, the outcome of call %d, which has another %s", i, j, r.Call, what)
	}
	if a.continued == nil {
		a.continued = map[uint64]uint64{}
	}
	a.continued[j] = i
	return nil
}

// checkReadContinues checks a later leg of a bridged read as
// checkContinues checks a call's: the entry its "continues" names must be
// an earlier leg of the same read — same kind, actor, server, resource or
// prompt and arguments — that was answered (its result asked for the
// input this leg carries), and no other leg may continue it.
func (a *auditor) checkReadContinues(i uint64, e *Entry) error {
	leg, err := ParseRead(e)
	if err != nil {
		return entryProblem(i, "%v", err)
	}
	j := leg.Continues
	if j == 0 {
		return nil
	}
	if j >= i {
		return entryProblem(i, "%s %d continues entry %d, which is not an earlier one", leg.Kind, i, j)
	}
	if prev, ok := a.continued[j]; ok {
		return entryProblem(i, "%s %d continues entry %d, which entry %d continues already", leg.Kind, i, j, prev)
	}
	pe, err := a.entry(j)
	if err != nil {
		return err
	}
	if pe.Kind != leg.Kind {
		return entryProblem(i, "%s %d continues entry %d, a %q entry, not a %s", leg.Kind, i, j, pe.Kind, leg.Kind)
	}
	prev, err := ParseRead(pe)
	if err != nil {
		return entryProblem(i, "%s %d continues entry %d, which does not parse: %v", leg.Kind, i, j, err)
	}
	if prev.ResultSHA256 == "" {
		return entryProblem(i, "%s %d continues entry %d, which has no result to ask for input", leg.Kind, i, j)
	}
	var what string
	switch {
	case prev.Actor != leg.Actor:
		what = "actor"
	case prev.Server != leg.Server:
		what = "server"
	case prev.URI != leg.URI:
		what = "resource"
	case prev.Prompt != leg.Prompt:
		what = "prompt"
	case !bytes.Equal(prev.Args, leg.Args):
		what = "arguments"
	}
	if what != "" {
		return entryProblem(i, "%s %d continues entry %d, which has another %s", leg.Kind, i, j, what)
	}
	if a.continued == nil {
		a.continued = map[uint64]uint64{}
	}
	a.continued[j] = i
	return nil
}

// otherCall names what tells call b from call a, "" when b can be a later
// leg of a: the same actor, server, tool, arguments and client.
func otherCall(a, b *CallEntry) string {
	switch {
	case a.Actor != b.Actor:
		return "actor"
	case a.Server != b.Server:
		return "server"
	case a.Tool != b.Tool:
		return "tool"
	case !bytes.Equal(a.Args, b.Args) || a.ArgsSHA256 != b.ArgsSHA256:
		return "arguments"
	case (a.Client == nil) != (b.Client == nil) || a.Client != nil && *a.Client != *b.Client:
		return "client"
	}
	return ""
}

// entry reads and parses entry j, which the audit has checked already.
func (a *auditor) entry(j uint64) (*Entry, error) {
	es, err := a.src.Entries(a.ctx, j, j+1)
	if err != nil {
		return nil, fmt.Errorf("audit: reading entry %d again: %w", j, err)
	}
	if len(es) != 1 {
		return nil, fmt.Errorf("audit: reading entry %d again: %d entries", j, len(es))
	}
	e, err := ParseEntry(es[0])
	if err != nil {
		return nil, entryProblem(j, "does not parse: %v", err)
	}
	return e, nil
}

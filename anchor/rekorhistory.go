package anchor

import (
	"bytes"
	"fmt"

	"github.com/provlog/provlog/log"
)

// rekorHistory compares the Rekor checkpoints of records, added in the
// order they were made (by anchored size), with each other: what no
// record alone shows. Each record's Rekor entries are checked on their
// own by [Verify], their consistency proofs from the record before
// included; here, two checkpoints of one Rekor key and origin and one
// tree size with different roots show that Rekor presented two
// histories, and an entry's consistency proof must start from the
// checkpoint of that Rekor's newest entry before it that is linked (or
// is the tree's first): the runner links from that one, so that an
// unlinked entry, which may be of a forked tree, is never built on. (A
// proof from the newest entry, unlinked or not, is accepted too: records
// made when the runner linked from it.) The audit, a bundle's check and
// an evidence's writer all run it.
type rekorHistory struct {
	first map[string]seenRekor // by key, origin and size
	last  map[string]seenRekor // by key and origin: the newest entry
	head  map[string]seenRekor // by key and origin: the newest entry linked, or the first
	trees map[string]string    // by key: the origin of the newest entry
	// unlinked names the records whose entry has no consistency proof
	// though the record before holds an entry of that Rekor tree (made
	// before records kept Rekor's proof, or Rekor did not give it), or
	// whose entry is of another tree than that Rekor's entry before (a
	// new shard, which nothing links to the old one).
	unlinked []string
}

type seenRekor struct {
	root []byte
	note string
	size uint64
	rec  string
}

// add compares r, stored as name and verified, with the records added
// before it, and returns what is wrong, each part "NAME: rekor.v1 I (URL)".
func (h *rekorHistory) add(name string, r *Record) []log.Problem {
	if h.first == nil {
		h.first, h.last, h.head = map[string]seenRekor{}, map[string]seenRekor{}, map[string]seenRekor{}
		h.trees = map[string]string{}
	}
	var probs []log.Problem
	linked := true
	for i, tl := range r.Tlogs {
		e := tl.RekorV1
		if e == nil {
			continue
		}
		cp, err := e.Checkpoint()
		if err != nil {
			continue // Verify passed, so it parses
		}
		part := fmt.Sprintf("%s: %s %d (%s)", name, tl.Kind, i, e.URL)
		tree := e.LogID + "\n" + cp.Origin
		seen := seenRekor{cp.Root, cp.Note, cp.Size, name}
		if o, ok := h.trees[e.LogID]; ok && o != cp.Origin {
			linked = false
		}
		h.trees[e.LogID] = cp.Origin
		if prev, ok := h.last[tree]; ok {
			head := h.head[tree]
			switch c := e.Consistency; {
			case c == nil:
				linked = false
			case c.Checkpoint != prev.note && c.Checkpoint != head.note:
				probs = append(probs, log.Problem{Part: part, Msg: fmt.Sprintf("its consistency proof does not start from the Rekor checkpoint (size %d) of record %s, the newest linked one before it", head.size, head.rec)})
			default:
				h.head[tree] = seen
			}
		} else {
			h.head[tree] = seen
		}
		h.last[tree] = seen
		key := fmt.Sprintf("%s\n%d", tree, cp.Size)
		s, ok := h.first[key]
		if !ok {
			h.first[key] = seenRekor{cp.Root, cp.Note, cp.Size, name}
			continue
		}
		if !bytes.Equal(s.root, cp.Root) {
			probs = append(probs, log.Problem{Part: part,
				Msg: fmt.Sprintf("Rekor fork: its checkpoint of %q at tree size %d has root %x, the one record %s carries has root %x",
					log.Printable(cp.Origin), cp.Size, cp.Root, s.rec, s.root)})
		}
	}
	if !linked {
		h.unlinked = append(h.unlinked, name)
	}
	return probs
}

// A RekorHistory compares the Rekor checkpoints of records as [AuditAll]
// and a bundle's check do (the same comparison): an evidence's writer
// runs it over the records up to its target, since the directory carries
// one record and its check can compare that record with no other.
type RekorHistory struct{ h rekorHistory }

// Add compares r, stored as name and accepted by [Verify], with the
// records added before it (add them by anchored size, as they were
// made), and returns what is wrong, each part "NAME: rekor.v1 I (URL)".
func (h *RekorHistory) Add(name string, r *Record) []log.Problem { return h.h.add(name, r) }

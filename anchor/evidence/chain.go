package evidence

import (
	"encoding/hex"

	"github.com/provlog/provlog/log"
)

// A TaskChain says how much of a task entry's history its evidence
// proves whole. Every task entry provlog writes but a create names the
// same task's previous entry (prev, by index and leaf hash), so the
// entries from the evidence's entry back along prev leave none of the
// task's out; entries written before prev was added name none, and an
// entry left out before them could not be told.
type TaskChain struct {
	// Whole says the chain reaches the task's creation, at entry Until;
	// otherwise Until is the earliest entry on it, which names no
	// previous entry.
	Whole bool   `json:"whole"`
	Until uint64 `json:"until"`
}

// checkChain follows prev from the entry, a task entry, back through the
// context: each entry it names must be here, of the same task, with the
// leaf hash named, and before the entry naming it. A chain that breaks is
// a problem (an entry of the task's history left out); one that ends at
// an entry with no prev is reported as not linked before it.
func (c *checker) checkChain() {
	e := c.rep.Entry
	if e == nil || !log.IsTaskKind(e.Kind) {
		return
	}
	task, _ := e.Fields["task_id"].(string)
	byIndex := map[uint64]*log.Entry{}
	for _, ce := range c.rep.Context {
		if ce.Entry != nil {
			byIndex[ce.Index] = ce.Entry
		}
	}
	i, cur, name := c.rep.Manifest.Index, e, EntryFile
	for {
		if cur.Kind == log.KindTaskCreate {
			c.rep.Chain = &TaskChain{Whole: true, Until: i}
			return
		}
		t, err := log.ParseTask(cur)
		if err != nil {
			c.bad(name, "%v", err)
			return
		}
		if t.Prev == nil {
			c.rep.Chain = &TaskChain{Until: i}
			return
		}
		p := *t.Prev
		pn := contextName(p.Index, ".json")
		prev, ok := byIndex[p.Index]
		switch {
		case p.Index >= i:
			c.bad(name, "names entry %d as task %q's previous entry, which is not before it", p.Index, task)
		case !ok:
			c.bad(ManifestFile, "entry %d names entry %d as task %q's previous entry, which the evidence does not hold (%s is missing): the task's history here is not whole", i, p.Index, task, pn)
		case hex.EncodeToString(log.LeafHash(c.files[pn])) != p.LeafHash:
			c.bad(pn, "is not the entry %d that entry %d names as task %q's previous entry: its leaf hash is not %s", p.Index, i, task, p.LeafHash)
		case prev.Fields["task_id"] != task:
			c.bad(pn, "is an entry of task %q, but entry %d names it as task %q's previous entry", prev.Fields["task_id"], i, task)
		default:
			i, cur, name = p.Index, prev, pn
			continue
		}
		return
	}
}

// chainLine says in words what c proves of the task's history.
func chainLine(c *TaskChain) string {
	if c.Whole {
		return "  task history: whole from the task's creation (entry " + group(c.Until) + "): each entry names the one before it, and all are here"
	}
	return "  task history: not linked before entry " + group(c.Until) + " (written by a provlog from before task entries named their previous one): an entry left out before it could not be told"
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func entriesOf(cs []Context) []*log.Entry {
	out := make([]*log.Entry, len(cs))
	for i, c := range cs {
		out[i] = c.Entry
	}
	return out
}

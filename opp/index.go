package opp

import (
	"container/list"
	"encoding/hex"
	"fmt"
)

// Bounded memory. The log is the truth; what the engine keeps in memory is
// an index into it and a bounded cache:
//
//   - an index of every task: its id, the index of its create entry, its
//     state, and the chain of log indices of its applied entries (each
//     link names the task's previous entry). That is about 60 bytes a
//     task and 16 an entry, pointer-free, so the garbage collector never
//     scans it.
//   - a cache of whole tasks (history, ownership intervals, claims), the
//     most recently used ones, bounded in bytes ([Options.CacheBytes]). A
//     task not in it is rebuilt from its entries, read from the log by
//     the index and applied in order. Those entries passed the rules when
//     they were indexed, so rebuilding applies them without checking again.
//
// Only entries that passed the rules are indexed; an entry that broke one
// is a Violation and belongs to no task.

// taskKey is a task id's 16 bytes ("t_" and 32 hex digits).
type taskKey [16]byte

func keyOf(id string) (taskKey, bool) {
	var k taskKey
	if checkTaskID(id) != nil {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(id[2:])); err != nil {
		return k, false
	}
	return k, true
}

// noLink ends a task's chain of entries.
const noLink = ^uint32(0)

// head is one task in the index.
type head struct {
	created uint64 // index of its task.create entry
	last    uint32 // its latest entry's link
	state   TaskState
}

// link is one applied task entry.
type link struct {
	index uint64 // the entry's log index
	prev  uint32 // the same task's previous entry, or noLink
}

// chunkBits sizes the chunks the index grows by, so that growing never
// copies (and never briefly doubles) what it holds.
const chunkBits = 13

// chunks is a growable array in fixed-size chunks.
type chunks[T any] struct {
	c [][]T
	n uint64
}

func (c *chunks[T]) add(v T) (uint32, error) {
	if c.n >= uint64(noLink) {
		return 0, fmt.Errorf("the task index is full (%d items)", c.n)
	}
	if c.n>>chunkBits == uint64(len(c.c)) {
		c.c = append(c.c, make([]T, 0, 1<<chunkBits))
	}
	last := &c.c[len(c.c)-1]
	*last = append(*last, v)
	c.n++
	return uint32(c.n - 1), nil
}

func (c *chunks[T]) at(i uint32) *T { return &c.c[i>>chunkBits][i&(1<<chunkBits-1)] }

func (c *chunks[T]) len() uint32 { return uint32(c.n) }

// index maps tasks to their entries. Its user serializes access.
type index struct {
	ids   map[taskKey]uint32
	heads chunks[head]
	links chunks[link]
}

func newIndex() *index { return &index{ids: map[taskKey]uint32{}} }

func (x *index) lookup(id string) (uint32, bool) {
	k, ok := keyOf(id)
	if !ok {
		return 0, false
	}
	n, ok := x.ids[k]
	return n, ok
}

// add indexes a new task whose create entry is at i.
func (x *index) add(id string, i uint64) (uint32, error) {
	k, ok := keyOf(id)
	if !ok {
		return 0, fmt.Errorf("task id %q is malformed", id)
	}
	l, err := x.links.add(link{index: i, prev: noLink})
	if err != nil {
		return 0, err
	}
	n, err := x.heads.add(head{created: i, last: l, state: StatePending})
	if err != nil {
		return 0, err
	}
	x.ids[k] = n
	return n, nil
}

// extend adds the entry at i to task n, which is now in state st.
func (x *index) extend(n uint32, i uint64, st TaskState) error {
	h := x.heads.at(n)
	l, err := x.links.add(link{index: i, prev: h.last})
	if err != nil {
		return err
	}
	h.last, h.state = l, st
	return nil
}

// lastIndex is the log index of task n's latest entry.
func (x *index) lastIndex(n uint32) uint64 { return x.links.at(x.heads.at(n).last).index }

// entries returns the log indices of task n's entries, oldest first.
func (x *index) entries(n uint32) []uint64 {
	var out []uint64
	for l := x.heads.at(n).last; l != noLink; l = x.links.at(l).prev {
		out = append(out, x.links.at(l).index)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// cache holds whole tasks, the least recently used evicted first once
// their cost passes max. Its user serializes access.
type cache struct {
	max, cost int64
	order     *list.List // of *cached, most recent at the front
	byTask    map[uint32]*list.Element
}

type cached struct {
	n    uint32
	t    *task
	cost int64
}

func newCache(max int64) *cache {
	return &cache{max: max, order: list.New(), byTask: map[uint32]*list.Element{}}
}

func (c *cache) get(n uint32) *task {
	el := c.byTask[n]
	if el == nil {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cached).t
}

// put caches t as task n, replacing what was cached for it.
func (c *cache) put(n uint32, t *task) {
	cost := t.cost()
	if el := c.byTask[n]; el != nil {
		ca := el.Value.(*cached)
		c.cost += cost - ca.cost
		ca.t, ca.cost = t, cost
		c.order.MoveToFront(el)
	} else {
		c.byTask[n] = c.order.PushFront(&cached{n: n, t: t, cost: cost})
		c.cost += cost
	}
	for c.cost > c.max && c.order.Len() > 1 {
		el := c.order.Back()
		ca := el.Value.(*cached)
		c.order.Remove(el)
		delete(c.byTask, ca.n)
		c.cost -= ca.cost
	}
}

// cost estimates the bytes t holds: its entries' sizes (kept as they
// were read, in strings of its events) and a fixed share per event for
// the structures around them.
func (t *task) cost() int64 { return t.bytes + 256*int64(len(t.History)) + 512 }

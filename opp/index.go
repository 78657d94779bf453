package opp

import (
	"container/list"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"
)

// Bounded memory. The log is the truth; what the engine keeps in memory is
// an index into it and a bounded cache:
//
//   - an index of every task: its id, the index of its create entry, its
//     state, and the chain of log indices of its applied entries (each
//     link names the task's previous entry). That is about 36 bytes a
//     task and 9 an entry, off the Go heap (offheap below).
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
	first uint32 // its task.create entry's link
	last  uint32 // its latest entry's link
	state uint8  // stateCodes
}

// pos is a log index in 5 bytes, little endian: the index holds one per
// entry, and a log reaches 2^40 entries only after a trillion calls.
type pos [5]byte

// maxPos bounds the log indices a pos holds.
const maxPos = 1 << 40

func posOf(i uint64) pos {
	return pos{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24), byte(i >> 32)}
}

func (p *pos) index() uint64 {
	return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 | uint64(p[4])<<32
}

// stateCodes are the task states as head stores them.
var stateCodes = map[TaskState]uint8{StatePending: 1, StateAccepted: 2, StateCompleted: 3, StateCancelled: 4}

// chunkBits sizes the chunks the index grows by, so that growing never
// copies (and never briefly doubles) what it holds.
const chunkBits = 14

// offheap is memory mapped outside the Go heap, for the index: the
// garbage collector neither scans it nor counts it toward its heap goal,
// which would otherwise let as much again of garbage pile up before each
// collection. Only types without pointers are stored in it. release
// returns all of it; a taskSet's cleanup calls it.
type offheap struct {
	mu      sync.Mutex
	regions [][]byte
}

func (o *offheap) alloc(n int) ([]byte, error) {
	b, err := mapMemory(n)
	if err != nil {
		return nil, fmt.Errorf("growing the task index by %d bytes: %w", n, err)
	}
	o.mu.Lock()
	o.regions = append(o.regions, b)
	o.mu.Unlock()
	return b, nil
}

func (o *offheap) free(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, r := range o.regions {
		if &r[0] == &b[0] {
			o.regions = slices.Delete(o.regions, i, i+1)
			unmapMemory(r)
			return
		}
	}
}

func (o *offheap) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.regions {
		unmapMemory(r)
	}
	o.regions = nil
}

// chunks is a growable array of T, which holds no pointers, in
// fixed-size chunks of off-heap memory.
type chunks[T any] struct {
	mem *offheap
	c   [][]T
	n   uint64
}

func (c *chunks[T]) add(v T) (uint32, error) {
	if c.n >= uint64(noLink) {
		return 0, fmt.Errorf("the task index is full (%d items)", c.n)
	}
	if c.n>>chunkBits == uint64(len(c.c)) {
		var zero T
		b, err := c.mem.alloc(int(unsafe.Sizeof(zero)) << chunkBits)
		if err != nil {
			return 0, err
		}
		c.c = append(c.c, unsafe.Slice((*T)(unsafe.Pointer(&b[0])), 1<<chunkBits))
	}
	c.c[c.n>>chunkBits][c.n&(1<<chunkBits-1)] = v
	c.n++
	return uint32(c.n - 1), nil
}

func (c *chunks[T]) at(i uint32) *T { return &c.c[i>>chunkBits][i&(1<<chunkBits-1)] }

func (c *chunks[T]) len() uint32 { return uint32(c.n) }

// table finds tasks by id: open addressing over off-heap slots holding
// task number + 1 (0: empty), keyed by the ids in index.keys. The hash is
// seeded, so ids chosen to collide (a crafted log under audit) cannot
// make lookups slow.
type table struct {
	mem   *offheap
	seed  maphash.Seed
	raw   []byte
	slots []uint32
	n     int
}

func (t *table) find(k taskKey, keys *chunks[taskKey]) (uint32, bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.Comparable(t.seed, k) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if *keys.at(s - 1) == k {
			return s - 1, true
		}
	}
}

// insert adds task n, whose id keys holds, growing the table to keep it
// at most three quarters full.
func (t *table) insert(n uint32, keys *chunks[taskKey]) error {
	if (t.n+1)*4 > len(t.slots)*3 {
		size := max(1<<12, 2*len(t.slots))
		raw, err := t.mem.alloc(4 * size)
		if err != nil {
			return err
		}
		old := t.raw
		t.raw, t.slots, t.n = raw, unsafe.Slice((*uint32)(unsafe.Pointer(&raw[0])), size), 0
		for m := range n {
			t.put(m, keys)
		}
		if old != nil {
			t.mem.free(old)
		}
	}
	t.put(n, keys)
	return nil
}

func (t *table) put(n uint32, keys *chunks[taskKey]) {
	mask := uint64(len(t.slots) - 1)
	i := maphash.Comparable(t.seed, *keys.at(n)) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = n + 1
	t.n++
}

// index maps tasks to their entries: per task its id, head and the chain
// of its entries' links (log index and previous link), all off the Go
// heap. Its user serializes access.
type index struct {
	mem   *offheap
	ids   table
	keys  chunks[taskKey]
	heads chunks[head]
	at    chunks[pos]    // a link's log index
	prev  chunks[uint32] // a link's previous link of the same task, or noLink
}

func newIndex() *index {
	m := &offheap{}
	return &index{mem: m, ids: table{mem: m, seed: maphash.MakeSeed()}, keys: chunks[taskKey]{mem: m},
		heads: chunks[head]{mem: m}, at: chunks[pos]{mem: m}, prev: chunks[uint32]{mem: m}}
}

func (x *index) lookup(id string) (uint32, bool) {
	k, ok := keyOf(id)
	if !ok {
		return 0, false
	}
	return x.ids.find(k, &x.keys)
}

func (x *index) link(i uint64, prev uint32) (uint32, error) {
	if i >= maxPos {
		return 0, fmt.Errorf("the task index holds log indices below 2^40, not %d", i)
	}
	if _, err := x.prev.add(prev); err != nil {
		return 0, err
	}
	return x.at.add(posOf(i))
}

// add indexes a new task whose create entry is at i.
func (x *index) add(id string, i uint64) (uint32, error) {
	k, ok := keyOf(id)
	if !ok {
		return 0, fmt.Errorf("task id %q is malformed", id)
	}
	l, err := x.link(i, noLink)
	if err != nil {
		return 0, err
	}
	if _, err := x.keys.add(k); err != nil {
		return 0, err
	}
	n, err := x.heads.add(head{first: l, last: l, state: stateCodes[StatePending]})
	if err != nil {
		return 0, err
	}
	return n, x.ids.insert(n, &x.keys)
}

// extend adds the entry at i to task n, which is now in state st.
func (x *index) extend(n uint32, i uint64, st TaskState) error {
	h := x.heads.at(n)
	l, err := x.link(i, h.last)
	if err != nil {
		return err
	}
	h.last, h.state = l, stateCodes[st]
	return nil
}

// lastIndex is the log index of task n's latest entry.
func (x *index) lastIndex(n uint32) uint64 { return x.at.at(x.heads.at(n).last).index() }

// created is the log index of task n's create entry.
func (x *index) created(n uint32) uint64 { return x.at.at(x.heads.at(n).first).index() }

// entries returns the log indices of task n's entries, oldest first.
func (x *index) entries(n uint32) []uint64 {
	var out []uint64
	for l := x.heads.at(n).last; l != noLink; l = *x.prev.at(l) {
		out = append(out, x.at.at(l).index())
	}
	slices.Reverse(out)
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

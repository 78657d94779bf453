package pebbleguard

// The compaction scheduler of a guarded Pebble instance. It grants what
// Pebble's own default grants (as many compactions at once as the DB says
// it may run without permission), with one difference: once the instance's
// file system has stopped (the store failed, or it retired the
// instance, see fs.go), no compaction starts. A failed instance's
// state in memory may be ahead of its disk (a flush or a MANIFEST write
// failed part-way), and compacting on it is what Pebble's own invariant
// checks caught going wrong (an L0 sublevel index out of step, seen under
// -race after an injected write error). A failed store serves reads from
// what it has; compactions buy it nothing.
//
// Flushes and delete-only compactions do not go through a scheduler in
// Pebble v2.1.7; the frozen file system bounds those (fs.go).

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// gateTick is how often the gate offers a waiting compaction a slot that
// opened without a Done (the DB's allowance grows with its backlog).
const gateTick = 100 * time.Millisecond

// CompactionScheduler returns the scheduler for the instance on f (a new
// one for each instance): Pebble's default grants, none once f has
// stopped.
func (f *FS) CompactionScheduler() pebble.CompactionScheduler { return newCompactionGate(f.Stopped) }

// compactionGate is a pebble.CompactionScheduler for one DB.
type compactionGate struct {
	stopped func() bool
	db      pebble.DBForCompaction // set by Register, before any other call

	mu           sync.Mutex
	running      int
	unregistered bool

	poke chan struct{} // a slot may have opened
	quit chan struct{} // closed by Unregister
	done chan struct{} // closed when the granter has returned
}

func newCompactionGate(stopped func() bool) *compactionGate {
	return &compactionGate{
		stopped: stopped,
		poke:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Register starts the granter, which alone grants waiting compactions.
func (g *compactionGate) Register(_ int, db pebble.DBForCompaction) {
	g.db = db
	go g.granter()
}

// Unregister stops the granter and waits for it: after it returns no
// method of the DB is called.
func (g *compactionGate) Unregister() {
	g.mu.Lock()
	if g.unregistered {
		g.mu.Unlock()
		return
	}
	g.unregistered = true
	g.mu.Unlock()
	close(g.quit)
	<-g.done
}

// TrySchedule grants a compaction the DB wants to start now, if there is
// a slot and the file system has not stopped.
func (g *compactionGate) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unregistered || g.stopped() {
		return false, nil
	}
	if g.db.GetAllowedWithoutPermission() <= g.running {
		return false, nil
	}
	g.running++
	return true, g
}

// UpdateGetAllowedWithoutPermission is called by the DB, possibly with its
// mutex held: the granter, not this call, asks the DB for work.
func (g *compactionGate) UpdateGetAllowedWithoutPermission() { g.wake() }

func (g *compactionGate) wake() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// granter offers open slots to the DB's waiting compaction, on a poke or
// a tick, until Unregister or the file system stops (an abandoned
// instance is never unregistered).
func (g *compactionGate) granter() {
	defer close(g.done)
	t := time.NewTicker(gateTick)
	defer t.Stop()
	for {
		select {
		case <-g.quit:
			return
		case <-g.poke:
		case <-t.C:
		}
		if g.stopped() {
			return // for good: a stopped file system never restarts
		}
		g.grant()
	}
}

// grant gives the DB as many waiting compactions as there are slots.
func (g *compactionGate) grant() {
	for {
		g.mu.Lock()
		open := !g.unregistered && !g.stopped() && g.db.GetAllowedWithoutPermission() > g.running
		g.mu.Unlock()
		if !open {
			return
		}
		if waiting, _ := g.db.GetWaitingCompaction(); !waiting {
			return
		}
		if !g.db.Schedule(g) {
			return
		}
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
	}
}

// The grant handle: the gate does not pace compactions.

func (g *compactionGate) Started()                                          {}
func (g *compactionGate) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (g *compactionGate) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done frees the compaction's slot.
func (g *compactionGate) Done() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	g.wake()
}

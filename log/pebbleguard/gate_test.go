package pebbleguard

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// gateDB is a DBForCompaction with a fixed allowance and a count of
// compactions waiting; Schedule starts one (it runs until the test calls
// Done on the handle).
type gateDB struct {
	allowed int
	mu      sync.Mutex
	waiting int
	started []pebble.CompactionGrantHandle
}

func (d *gateDB) GetAllowedWithoutPermission() int { return d.allowed }

func (d *gateDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting > 0, pebble.WaitingCompaction{}
}

func (d *gateDB) Schedule(h pebble.CompactionGrantHandle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == 0 {
		return false
	}
	d.waiting--
	d.started = append(d.started, h)
	return true
}

func (d *gateDB) startedCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.started)
}

// TestCompactionGate: the gate grants up to the DB's allowance, hands a
// freed slot to a waiting compaction, and grants nothing once the file
// system has stopped.
func TestCompactionGate(t *testing.T) {
	var stopped atomic.Bool
	g := newCompactionGate(stopped.Load)
	db := &gateDB{allowed: 2}
	g.Register(2, db)
	defer g.Unregister()

	for i, want := range []bool{true, true, false} {
		if ok, _ := g.TrySchedule(); ok != want {
			t.Fatalf("TrySchedule %d with allowance 2: %v, want %v", i+1, ok, want)
		}
	}
	// One waits; a Done frees a slot and the granter gives it.
	db.mu.Lock()
	db.waiting = 1
	db.mu.Unlock()
	g.Done()
	waitFor(t, "the waiting compaction to be granted the freed slot", func() bool { return db.startedCount() == 1 })

	// Stopped: no slot is granted, to TrySchedule or to a waiting one.
	stopped.Store(true)
	g.Done()
	g.Done()
	db.mu.Lock()
	db.waiting = 1
	db.mu.Unlock()
	if ok, _ := g.TrySchedule(); ok {
		t.Fatal("TrySchedule granted a compaction after the file system stopped")
	}
	time.Sleep(3 * gateTick) // the granter's ticks pass; none may grant
	if n := db.startedCount(); n != 1 {
		t.Fatalf("%d compactions granted after the file system stopped", n-1)
	}
}

// TestCompactionGateUnregister: Unregister returns once the granter has
// stopped, and nothing is granted afterwards.
func TestCompactionGateUnregister(t *testing.T) {
	g := newCompactionGate(func() bool { return false })
	db := &gateDB{allowed: 1}
	g.Register(2, db)
	g.Unregister()
	g.Unregister() // a second call returns too
	if ok, _ := g.TrySchedule(); ok {
		t.Fatal("TrySchedule granted after Unregister")
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

package logpebble

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/provlog/provlog/log/logtest"
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

// TestCompactionsRun: behind the gate a healthy store still compacts (a
// gate that granted nothing would pass the tests above).
func TestCompactionsRun(t *testing.T) {
	signer, v := logtest.NewKey(t, "gate.example/log")
	l, err := openFaultLog(t, t.TempDir(), vfs.Default, signer, v)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if errs := l.appendAll("gate", 2000, 8); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	waitFor(t, "a compaction", func() bool { return l.store.db.Metrics().Compact.Count > 0 })
}

package proxy

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// parking is the table of parked calls waiting for their client's retry.
type parking struct {
	mu   sync.Mutex
	m    map[string]*parkedCall // by the requestState of their round
	live int                    // calls parked once and not ended
	of   shares                 // those calls by actor

	// testingOnlyPanic, if set, is what a parked call's downstream work
	// panics with instead of running: no real server makes it panic, and
	// the recovery's log line is what a test checks (park.go, start).
	testingOnlyPanic atomic.Pointer[string]
}

func (t *parking) has(state string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[state]
	return ok
}

// reserve counts pc among the parked calls, if it is not yet and there is
// room (within Options.MaxParkedCalls and its actor's share), and returns
// a new requestState for its round, or why not.
func (t *parking) reserve(pc *parkedCall) (string, *jsonrpc.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !pc.counted {
		o, actor := &pc.p.opts, pc.actor()
		switch {
		case t.live >= pc.p.maxParked():
			return "", rpcError(jsonrpc.CodeInternalError, "provlog: %d calls wait for their clients' input already (the sidecar's parking.max); the request is refused", pc.p.maxParked())
		case t.of[actor] >= o.ParkedPerActor:
			return "", rpcError(jsonrpc.CodeInternalError, "provlog: %d calls of actor %q wait for its input already (its share, the sidecar's parking.per_actor %d of parking.max %d); the request is refused: answer them first (one unanswered is given up after parking.timeout)",
				t.of[actor], truncate(actor, 64), o.ParkedPerActor, pc.p.maxParked())
		}
		if t.of == nil {
			t.of = shares{}
		}
		t.live++
		t.of.take(actor, math.MaxInt)
		pc.counted = true
	}
	return newRequestState(), nil
}

// park puts pc's round in the table under state, for its client's retry,
// and watches it till the round's deadline: the timeout from when the
// round was first parked (a round put back after a refused retry keeps
// its deadline).
func (t *parking) park(pc *parkedCall, state string, pending map[string]*parkedAsk, last uint64) {
	timeout := pc.p.opts.ParkTimeout
	if timeout <= 0 {
		timeout = DefaultParkTimeout
	}
	taken := make(chan struct{})
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*parkedCall{}
	}
	if state != pc.state || pc.until.IsZero() {
		pc.until = time.Now().Add(timeout)
	}
	until := pc.until
	pc.state, pc.pending, pc.last, pc.taken = state, pending, last, taken
	t.m[state] = pc
	t.mu.Unlock()
	// The proxy's Close waits for the watch: a round its stop cuts is
	// closed, its closing leg and the server's outcome recorded, before
	// the log it writes to is closed.
	pc.p.wg.Go(func() { pc.watch(taken, until, timeout) })
}

// take takes the round parked under state if check passes it, or returns
// why not, leaving the table as it was.
func (t *parking) take(state string, check func(*parkedCall) *jsonrpc.Error) (*parkedCall, *jsonrpc.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc, ok := t.m[state]
	if !ok {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the requestState is unknown, expired or used already; make the call again without it (nothing was forwarded)")
	}
	if rerr := check(pc); rerr != nil {
		return nil, rerr
	}
	delete(t.m, state)
	close(pc.taken)
	return pc, nil
}

// remove takes pc's round out of the table and reports whether it was
// there.
func (t *parking) remove(pc *parkedCall) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[pc.state] != pc {
		return false
	}
	delete(t.m, pc.state)
	close(pc.taken)
	return true
}

// ended uncounts a parked call that is over.
func (t *parking) ended(pc *parkedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pc.counted {
		t.live--
		t.of.put(pc.actor())
		pc.counted = false
	}
}

// actor is the actor whose call or read pc is.
func (pc *parkedCall) actor() string {
	if pc.read != nil {
		return pc.read.entry.Actor
	}
	return pc.first.actor
}

package opp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
)

// sidecar is one sidecar's log on a shared PostgreSQL log, as cmd/provlog
// wires it: a sequencer over its own logpg store.
type sidecar struct {
	seq   *server.Sequencer
	store *logpg.Store
}

func openSidecar(tb testing.TB, dsn string, s note.Signer, v note.Verifier) *sidecar {
	tb.Helper()
	ctx := context.Background()
	store, err := logpg.Open(ctx, dsn, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	seq, err := server.OpenSequencer(ctx, store, s, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), "opp.test/shared", "vkey", []byte{1}, "test") },
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { seq.Close() })
	return &sidecar{seq: seq, store: store}
}

func (l *sidecar) Append(ctx context.Context, e []byte) (*log.Receipt, error) {
	return l.seq.Append(ctx, e)
}

func (l *sidecar) AppendFenced(ctx context.Context, e []byte, f log.Fence) (*log.Receipt, error) {
	return l.seq.AppendFenced(ctx, e, f)
}

func (l *sidecar) Shared() bool { return l.seq.Shared() }

func (l *sidecar) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	return l.store.Entries(ctx, start, end)
}

func (l *sidecar) LatestSize(ctx context.Context) (uint64, error) {
	st, err := l.store.Latest(ctx)
	return st.Size, err
}

func (l *sidecar) size() uint64 {
	n, _ := l.seq.Checkpoint()
	return n
}

// twoSidecars opens two sidecars' engines on one new log, each caching at
// most one whole task.
func twoSidecars(t *testing.T) (a, b *opp.Engine) {
	_, a, _, b = twoSidecarLogs(t, 1)
	return a, b
}

// twoSidecarLogs opens two sidecars on one new log, with their engines
// caching at most cacheBytes of whole tasks (0: the default).
func twoSidecarLogs(t *testing.T, cacheBytes int64) (la *sidecar, a *opp.Engine, lb *sidecar, b *opp.Engine) {
	dsn := pgtest.DSN(t)
	s, v := logtest.NewKey(t, "opp.test/shared")
	la, lb = openSidecar(t, dsn, s, v), openSidecar(t, dsn, s, v)
	open := func(l *sidecar) *opp.Engine {
		e, err := opp.Open(context.Background(), l, l.size(), &opp.Options{CacheBytes: cacheBytes})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	return la, open(la), lb, open(lb)
}

func status(t *testing.T, e *opp.Engine, id string) *opp.Task {
	t.Helper()
	st, err := e.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSharedStatusSeesOthersWrites: a sidecar that knows a task, but does
// not hold it whole, reads it after another sidecar's accept and answers
// with that accept, and decides on it.
func TestSharedStatusSeesOthersWrites(t *testing.T) {
	ctx := context.Background()
	a, b := twoSidecars(t)
	t1 := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "one"})).Task.ID
	t2 := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "two"})).Task.ID
	if st := status(t, b, t1); st.State != opp.StatePending {
		t.Fatalf("task one through B: %s, want %s", st.State, opp.StatePending)
	}
	status(t, b, t2) // B now holds task two whole, not one
	mustOK(t)(a.Accept(ctx, "bob", t1))
	st := status(t, b, t1)
	if st.State != opp.StateAccepted || st.Owner != "bob" || len(st.History) != 2 {
		t.Fatalf("task one through B after A's accept: %s, owner %q, %d events; want accepted by bob, 2 events", st.State, st.Owner, len(st.History))
	}
	status(t, b, t2)
	mustOK(t)(a.Release(ctx, "bob", t1, ""))
	if _, err := b.Accept(ctx, "carol", t1); err != nil {
		t.Fatalf("accept through B after A's release: %v", err)
	}
	status(t, b, t2)
	mustOK(t)(a.Accept(ctx, "dave", t2))
	if _, err := b.Accept(ctx, "erin", t2); ruleOf(err) != opp.RuleOwned {
		t.Fatalf("accept through B of a task A's accept gave to dave: %v, want %s", err, opp.RuleOwned)
	}
}

// TestSharedUpgradesRace: the owner's claims, each more certain than the
// last on new evidence, go through two sidecars at once while both read
// the task: each sidecar judges the other's claims as it catches up, and
// both judge the same; a more certain claim resting on the owner's own
// earlier claim is refused through either; the log alone rebuilds what
// both hold, with no violation.
func TestSharedUpgradesRace(t *testing.T) {
	ctx := context.Background()
	la, a, _, b := twoSidecarLogs(t, 0)
	id := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "raced claims"})).Task.ID
	mustOK(t)(a.Accept(ctx, "bob", id))
	var calls []uint64
	for range 40 {
		e, err := (&log.CallEntry{Time: time.Now(), Actor: "bob", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := la.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, rc.Index)
	}
	var wg sync.WaitGroup
	for k, e := range []*opp.Engine{a, b} {
		wg.Go(func() {
			for j := k; j < len(calls); j += 2 {
				prov := []string{"reported", "reviewed"}[j/2%2]
				_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: prov, Summary: "s", Source: "carol", Evidence: calls[j : j+1]})
				if err != nil && ruleOf(err) != opp.RuleUpgrade {
					t.Errorf("claim %d through sidecar %d: %v", j, k, err)
				}
			}
		})
		wg.Go(func() {
			for range 20 {
				if _, err := e.Status(ctx, id); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	own := mustOK(t)(a.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "s", Source: "carol"})).Index
	for k, e := range []*opp.Engine{a, b} {
		_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "s", Evidence: []uint64{own}})
		if ruleOf(err) != opp.RuleUpgrade {
			t.Errorf("through sidecar %d, a reviewed claim citing bob's own reported claim: %v, want %s", k, err, opp.RuleUpgrade)
		}
	}
	checkSharedRebuild(t, la, a, b)
}

// racedSidecar is a sidecar whose fenced appends another writer beats,
// for as long as race says so: it runs before each.
type racedSidecar struct {
	*sidecar
	race func()
}

func (l *racedSidecar) AppendFenced(ctx context.Context, e []byte, f log.Fence) (*log.Receipt, error) {
	l.race()
	return l.sidecar.AppendFenced(ctx, e, f)
}

// TestSharedFencedNotStarved: a claim through sidecar b whose fenced
// append is beaten 20 times running by claims on the task through
// sidecar a, each committed just before b's append, still gets in. Each
// loss is another writer's progress, so deciding again cannot spin; but
// b gave up after 16 losses, and a claim through one of two sidecars
// that claimed on one task back to back was refused (CI: "claim 7
// through sidecar 1: ... another writer changed the fenced key first").
func TestSharedFencedNotStarved(t *testing.T) {
	ctx := context.Background()
	la, a, lb, _ := twoSidecarLogs(t, 0)
	id := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "busy task"})).Task.ID
	mustOK(t)(a.Accept(ctx, "bob", id))
	const beaten = 20
	races := 0
	rb := &racedSidecar{sidecar: lb, race: func() {
		if races++; races <= beaten {
			mustOK(t)(a.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "a", Source: "carol"}))
		}
	}}
	b, err := opp.Open(ctx, rb, lb.size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "b", Source: "carol"}); err != nil {
		t.Fatalf("a claim through b beaten %d times: %v", beaten, err)
	}
	if races != beaten+1 {
		t.Errorf("b appended %d times, want %d (each race lost, then one won)", races, beaten+1)
	}
	checkSharedRebuild(t, la, a, b)
}

// checkSharedRebuild checks that the shared log l alone rebuilds, with no
// violation, what each sidecar's engine holds.
func checkSharedRebuild(t *testing.T, l *sidecar, engines ...*opp.Engine) {
	t.Helper()
	size, err := l.LatestSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := rebuildState(t, l, size)
	if len(want.Violations) > 0 {
		t.Fatalf("violations %v", want.Violations)
	}
	for k, e := range engines {
		if d := diffStates(mustState(t, e), want); len(d) > 0 {
			t.Errorf("sidecar %d differs from the log rebuilt: %v", k, d)
		}
	}
}

// TestSharedObservedNeedsResult: on a shared log, a sidecar judges an
// observed claim by the calls and results any sidecar wrote: a call one
// sidecar recorded has no result through either until the other records
// its result, and the log alone rebuilds the same.
func TestSharedObservedNeedsResult(t *testing.T) {
	ctx := context.Background()
	la, a, lb, b := twoSidecarLogs(t, 0)
	id := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(a.Accept(ctx, "bob", id))
	call := appendCallStart(t, la, "bob")
	want := fmt.Sprintf("your call %d, which has no call.result", call)
	for k, e := range []*opp.Engine{b, a} {
		_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{call}})
		if ruleOf(err) != opp.RuleEvidence || !strings.Contains(err.Error(), want) {
			t.Fatalf("through sidecar %d, an observed claim citing a call without its result: %v", k, err)
		}
	}
	appendCallResult(t, lb, "bob", call)
	mustOK(t)(a.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{call}}))
	checkSharedRebuild(t, la, a, b)
}

// TestSharedObservedCallOneTask: on a PostgreSQL log two sidecars write,
// a call bob cited through one sidecar as observed evidence for one task
// is refused through the other as observed evidence for a second task he
// owns, and nothing is written.
func TestSharedObservedCallOneTask(t *testing.T) {
	ctx := context.Background()
	la, a, lb, b := twoSidecarLogs(t, 0)
	one := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "one"})).Task.ID
	two := mustOK(t)(b.Create(ctx, "alice", opp.CreateArgs{Title: "two"})).Task.ID
	mustOK(t)(a.Accept(ctx, "bob", one))
	mustOK(t)(b.Accept(ctx, "bob", two))
	call := appendCallStart(t, la, "bob")
	appendCallResult(t, la, "bob", call)
	mustOK(t)(a.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: one, Provenance: "observed", Summary: "done", Evidence: []uint64{call}}))
	size := func() uint64 {
		n, err := lb.LatestSize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	_, err := b.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: two, Provenance: "observed", Summary: "done", Evidence: []uint64{call}})
	if ruleOf(err) != opp.RuleEvidence || !strings.Contains(err.Error(), one) {
		t.Errorf("through the second sidecar, call %d cited again for task %s: %v, want a refusal naming task %s", call, two, err, one)
	}
	if n := size() - before; n != 0 {
		t.Errorf("the refused claim wrote %d entries", n)
	}
	checkSharedRebuild(t, la, a, b)
}

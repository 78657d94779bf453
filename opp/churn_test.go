package opp_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/opp"
)

// TestTaskEntriesBounded: an agent that accepts and releases one task
// over and over grows its history without end, and once two such tasks
// no longer fit the cache every operation on them rebuilds one from all
// its entries (at 21,000 entries a task, 1,000 cycles took 17.7 s where
// they had taken 78 ms). A task takes a bounded number of entries: past
// it, accept, release and handoff are refused by rule limit and nothing
// is written, while its owner may still complete it and its creator
// cancel it; a rebuild of the log agrees with the engine.
func TestTaskEntriesBounded(t *testing.T) {
	ctx := context.Background()
	l := newLog(t)
	e := newEngine(t, l)
	r, err := e.Create(ctx, "boss", opp.CreateArgs{Title: "churn"})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Task.ID
	const cycles = 3000
	refusedAt := 0
	for n := 1; n <= cycles && refusedAt == 0; n++ {
		for _, op := range []func() (*opp.Result, error){
			func() (*opp.Result, error) { return e.Accept(ctx, "alice", id) },
			func() (*opp.Result, error) { return e.Release(ctx, "alice", id, "") },
		} {
			size := l.Size()
			_, err := op()
			if err == nil {
				continue
			}
			if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleLimit {
				t.Fatalf("cycle %d: %v", n, err)
			}
			if l.Size() != size {
				t.Fatalf("cycle %d: refused, but the log grew from %d to %d", n, size, l.Size())
			}
			refusedAt = n
			break
		}
	}
	st, err := e.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if refusedAt == 0 {
		t.Fatalf("%d accept/release cycles on one task were all written: its history holds %d entries", cycles, len(st.History))
	}
	t.Logf("refused at cycle %d, history %d entries", refusedAt, len(st.History))
	// Its owner (if any) may still complete it, its creator cancel it.
	if st.Owner == "alice" {
		if _, err := e.ReportCompletion(ctx, "alice", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "done", Source: "bob"}); err != nil {
			t.Fatalf("completing the full task: %v", err)
		}
	} else if _, err := e.Cancel(ctx, "boss", id, ""); err != nil {
		t.Fatalf("cancelling the full task: %v", err)
	}
	live, err := e.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := opp.Rebuild(ctx, l, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	got, err := rb.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != live.State || got.Owner != live.Owner || len(got.History) != len(live.History) || len(rb.Violations()) != 0 {
		t.Errorf("rebuilt %s/%s/%d (%d violations), live %s/%s/%d", got.State, got.Owner, len(got.History), len(rb.Violations()), live.State, live.Owner, len(live.History))
	}
}

// TestTaskEntriesBoundedShared: two sidecars on one PostgreSQL log, an
// actor on each accepting and releasing one task at once: the task stops
// at MaxEntries entries, as both engines and a rebuild of the log say.
func TestTaskEntriesBoundedShared(t *testing.T) {
	ctx := context.Background()
	la, a, _, b := twoSidecarLogs(t, 0)
	r, err := a.Create(ctx, "boss", opp.CreateArgs{Title: "churn"})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Task.ID
	var wg sync.WaitGroup
	var limited atomic.Int32
	for k, e := range []*opp.Engine{a, b} {
		actor := []string{"alice", "bob"}[k]
		wg.Go(func() {
			for range 4 * opp.MaxEntries {
				if limited.Load() > 0 {
					return // the other was refused: the task may be left owned
				}
				_, err := e.Accept(ctx, actor, id)
				if err == nil {
					_, err = e.Release(ctx, actor, id, "")
				}
				if re, ok := opp.Refusal(err); ok && re.Rule == opp.RuleLimit {
					limited.Add(1)
					return
				} else if err != nil && !ok {
					t.Errorf("%s: %v", actor, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if limited.Load() == 0 {
		t.Fatal("no actor was refused by rule limit")
	}
	sa, sb := status(t, a, id), status(t, b, id)
	rb, err := opp.Rebuild(ctx, la, la.size())
	if err != nil {
		t.Fatal(err)
	}
	got, err := rb.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(sa.History) != opp.MaxEntries || len(sb.History) != opp.MaxEntries || len(got.History) != opp.MaxEntries ||
		sa.State != got.State || sb.State != got.State || sa.Owner != got.Owner || sb.Owner != got.Owner {
		t.Errorf("entries: a %d (%s %q), b %d (%s %q), rebuilt %d (%s %q); want %d", len(sa.History), sa.State, sa.Owner,
			len(sb.History), sb.State, sb.Owner, len(got.History), got.State, got.Owner, opp.MaxEntries)
	}
}

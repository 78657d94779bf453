package opp_test

import (
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

func TestConcurrentAccept(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "race"})).Task.ID
	before := l.Size()
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = e.Accept(ctx, "agent-"+string(rune('A'+i%26))+hex.EncodeToString([]byte{byte(i)}), id)
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch ruleOf(err) {
		case "":
			wins++
		case opp.RuleOwned:
		default:
			t.Errorf("unexpected outcome: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d accepts won, want 1", wins)
	}
	es, err := l.Entries(ctx, before, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	accepts := 0
	for _, b := range es {
		if ent, _ := log.ParseEntry(b); ent != nil && ent.Kind == opp.KindAccept {
			accepts++
		}
	}
	if accepts != 1 || len(es) != 1 {
		t.Fatalf("%d entries, %d task.accept; want exactly one accept", len(es), accepts)
	}
	checkRebuild(t, l, e)
}

// TestConcurrentMixed runs writers on distinct and shared tasks alongside
// readers (run it with -race); afterwards the log rebuilds to the live
// state.
func TestConcurrentMixed(t *testing.T) {
	for _, cache := range []int64{0, 1} {
		t.Run(fmt.Sprint("cache=", cache), func(t *testing.T) { concurrentMixed(t, cache) })
	}
}

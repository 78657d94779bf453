package proxy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSiblingListsMarkedTogether: a server's notice that names two lists
// (resources/list_changed names the resources and the resource
// templates) marks both changed before a read of either is asked for.
// The fixture (a real process) changes both lists and says so; the test
// sees, at each read asked for (catalogue.testingOnlyAskRead, between
// triggerResync's marks and its reads), how many changes of each list
// were counted: the notices are the only ones to count them, and each
// counts both, so the two counts are equal whenever a read is asked for.
// Marked and asked one list after the other, the first list's read was
// asked for (and could end, and the front tell its clients) before the
// second was marked.
func TestSiblingListsMarkedTogether(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "lists"
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	c := p.live["fx"].d.cat
	var (
		mu     sync.Mutex
		uneven []string // what the hook saw where the counts differed
		asked  int      // reads of the resources asked for, after a notice
	)
	hook := func(slot listSlot) {
		res, tpl := resourceSlot, templateSlot
		if slot >= listSlots {
			res, tpl = newerSlot(res), newerSlot(tpl)
		}
		if slot != res && slot != tpl {
			return
		}
		nr, nt := c.asked[res].Load(), c.asked[tpl].Load()
		mu.Lock()
		defer mu.Unlock()
		if nr != nt {
			uneven = append(uneven, fmt.Sprintf("a read of %s asked for with %d change(s) of the resources counted and %d of the templates", c.slotName(slot), nr, nt))
		}
		if slot == resourceSlot && nr > 0 {
			asked++
		}
	}
	c.testingOnlyAskRead.Store(&hook)
	t.Cleanup(func() { c.testingOnlyAskRead.Store(nil) })

	cs := connectMemory(t, p, nil)
	// The test lists nothing: a front list asks for reads too (want),
	// and could do so between a notice's two marks.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__reshape"})
	if err != nil || res.IsError {
		t.Fatalf("fx__reshape: %v %v", err, res)
	}
	waitFor(t, "a read of the resources asked for by the server's notice", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return asked > 0
	})
	mu.Lock()
	defer mu.Unlock()
	for _, u := range uneven {
		t.Error(u)
	}
}

// TestListAfterNoticeReadsAgain: a front client's list, asked for after
// the server announced a change of that list which no read begun since
// covers, waits for a new read, though the last read began within
// freshFor. That read began before the notice: served from it, a client
// listing at once on hearing of the change (the front tells it when the
// first list the notice named is applied) was shown the list from before
// the change.
func TestListAfterNoticeReadsAgain(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "lists"
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	c := p.live["fx"].d.cat
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
		t.Fatalf("listing the templates: %v", err)
	}
	c.mu.Lock()
	before := c.begun[templateSlot]
	// As of now: the read the list made is within freshFor however long
	// the machine took to get here.
	c.begunAt[templateSlot] = time.Now()
	c.mu.Unlock()
	// The server's notice, as triggerResync marks it, before the read it
	// asks for has begun.
	c.asked[templateSlot].Add(1)
	if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
		t.Fatalf("listing the templates after the notice: %v", err)
	}
	c.mu.Lock()
	after, ended, covers := c.begun[templateSlot], c.ended[templateSlot], c.covers[templateSlot]
	c.mu.Unlock()
	if after == before || ended < after {
		t.Errorf("a list after the server's notice was answered from read %d, begun before the notice (reads begun %d, ended %d): want a read begun after it, ended", before, after, ended)
	}
	if got := c.asked[templateSlot].Load(); covers < got {
		t.Errorf("the last read covers %d of the server's %d changes of the templates", covers, got)
	}
}

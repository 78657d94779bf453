package proxy

import (
	"context"
	"fmt"
	"sync"
	"testing"

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

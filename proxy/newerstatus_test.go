package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listsProxy starts a proxy of the fixture server fx ("lists").
func listsProxy(t *testing.T) *Proxy {
	t.Helper()
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "lists"
	return startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
}

// reshapeNewer has a 2026-07-28 client of p call fx__reshape, which gives
// the server's second process a tool, added, its first process does not
// list; it returns once that client is shown it, with that client and a
// 2025-11-25 one.
func reshapeNewer(t *testing.T, p *Proxy) (newer, older *mcp.ClientSession) {
	t.Helper()
	newer = connectHTTP(t, serveHTTP(t, p), "", nil)
	older = connectMemory(t, p, nil)
	if v := newer.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the client speaks %s", v)
	}
	if _, err := newer.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__reshape"}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the 2026-07-28 client shown fx__added", func() bool {
		_, ok := frontTools(t, newer)["fx__added"]
		return ok
	})
	return newer, older
}

// TestStatusCountsToolsAsShown: provlog__status counts a stdio server's
// tools as its clients are shown them, per process: "tools" those a
// 2025-11-25 client is shown (the first process's), the newer session's
// "tools" those a 2026-07-28 client is shown, whichever client asks. It
// counted every tool registered, the tools only the second process lists
// with the first's: one more than the 2025-11-25 client is shown, which
// it can neither see nor call, and no figure a 2026-07-28 client's list
// matches.
func TestStatusCountsToolsAsShown(t *testing.T) {
	newer, older := reshapeNewer(t, listsProxy(t))
	shown := func(cs *mcp.ClientSession) (n int) {
		for name := range frontTools(t, cs) {
			if strings.HasPrefix(name, "fx__") {
				n++
			}
		}
		return n
	}
	olderN, newerN := shown(older), shown(newer)
	if olderN == newerN {
		t.Fatalf("both clients are shown %d tools: the fixture's second process lists one more", olderN)
	}
	for _, asker := range []*mcp.ClientSession{older, newer} {
		st := serverStatus(t, callStatus(t, asker), "fx")
		ns, _ := st["newer_session"].(map[string]any)
		got := fmt.Sprintf("tools %v, newer session's %v", st["tools"], ns["tools"])
		if want := fmt.Sprintf("tools %d, newer session's %d", olderN, newerN); got != want {
			t.Errorf("provlog__status asked by a %s client: %s, want %s (as the clients are shown)", asker.InitializeResult().ProtocolVersion, got, want)
		}
	}
}

// TestStatusSkippedToolsPerProcess: provlog__status names the tools the
// front server refused per process, as it counts the tools shown:
// "skipped_tools" those of the first process's list, the newer session's
// "skipped_tools" those only the second process lists (here bad_added,
// which it lists once reshape added "added" to it). One map held both,
// so bad_added, which no 2025-11-25 client could have been shown, read as
// skipped from that client's list.
func TestStatusSkippedToolsPerProcess(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "listsbad"
	_, older := reshapeNewer(t, startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil))
	// skipped names the tools a status part (a server's, or its newer
	// session's) reports as skipped, sorted.
	skipped := func(part map[string]any) []string {
		m, _ := part["skipped_tools"].(map[string]any)
		return slices.Sorted(maps.Keys(m))
	}
	var st, ns map[string]any
	// The newer session's list is applied (its skipped tools noted) after
	// its client is shown fx__added.
	eventuallyTrue(t, "provlog__status names bad_added as skipped", func() bool {
		st = serverStatus(t, callStatus(t, older), "fx")
		ns, _ = st["newer_session"].(map[string]any)
		return slices.Contains(skipped(st), "bad_added") || slices.Contains(skipped(ns), "bad_added")
	})
	got := fmt.Sprintf("skipped_tools %v, newer session's %v", skipped(st), skipped(ns))
	if want := "skipped_tools [bad_header bad_schema], newer session's [bad_added]"; got != want {
		t.Errorf("provlog__status: %s, want %s", got, want)
	}
	newerSkipped, _ := ns["skipped_tools"].(map[string]any)
	if why, _ := newerSkipped["bad_added"].(string); why == "" {
		t.Errorf("the newer session's skipped_tools do not say why bad_added was refused: %v", ns)
	}
}

// TestCatalogueListHeldOnce: a catalogue keeps each list it read once:
// every registration's definition is the very bytes of the list that
// holds it (the first session's list as last applied, or the newer
// session's), after the lists were read again. The registrations held a
// copy of the first session's list besides the list itself, about
// doubling the memory the lists take (BenchmarkListsHeld).
func TestCatalogueListHeldOnce(t *testing.T) {
	p := listsProxy(t)
	c := p.downstreams()[0].cat
	listHeldOnce(t, c, "on connecting", false)
	_, older := reshapeNewer(t, p)
	listHeldOnce(t, c, "after the newer session's lists were read", true)
	listExpired(p)
	shownLists(t, older) // the first session's lists read again
	frontTools(t, older)
	listHeldOnce(t, c, "after the lists were read again", true)
}

// listHeldOnce checks that every registration of c holds the bytes of the
// list that holds its item, and that some do, of the newer session's
// only too if newerOnly.
func listHeldOnce(t *testing.T, c *catalogue, when string, newerOnly bool) {
	t.Helper()
	c.syncMu.Lock() // no list is being applied
	defer c.syncMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	var checked, newer int
	for slot := range listSlots {
		_, _, _, nameKey := c.kinds[slot].where()
		first := map[string]json.RawMessage{}
		for _, raw := range c.lists[slot].first {
			first[nameOf(raw, nameKey)] = raw
		}
		for front, r := range c.lists[slot].reg {
			held := first[r.name]
			if r.newerOnly {
				held = c.newer.defs[slot][r.name]
				newer++
			}
			if len(r.def) == 0 || len(held) == 0 || &r.def[0] != &held[0] {
				t.Errorf("%s: %s %s: its registration holds a copy of its definition, not the list's", when, c.kinds[slot].plural(), front)
			}
			checked++
		}
	}
	if checked == 0 || newerOnly && newer == 0 {
		t.Errorf("%s: %d registrations checked, %d of the newer session's only", when, checked, newer)
	}
}

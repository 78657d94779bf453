package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestServersLive: servers added and removed while the proxy runs appear
// at and leave the front of a session that stays open throughout; a
// removed stdio server's process exits; calls to an added one are
// recorded; an id that is taken is refused.
func TestServersLive(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "a")}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	pidOf := func(tool string) int {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"ms": 0}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, err, res)
		}
		l.checkReceipt(t, metaReceipt(res.Meta))
		var pid int
		if _, err := fmt.Sscanf(textOf(res), "slept 0ms in pid %d", &pid); err != nil {
			t.Fatalf("%s said %q", tool, textOf(res))
		}
		return pid
	}
	waitTool := func(name string, want bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			has := slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == name })
			if has == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tool %s listed: %v, want %v", name, has, want)
			}
		}
	}

	pidA := pidOf("a__sleep")
	if err := p.AddServer(fixtureServerConfig(t, "b")); err != nil {
		t.Fatal(err)
	}
	waitTool("b__sleep", true)
	pidB := pidOf("b__sleep")
	if pidB == pidA {
		t.Fatalf("b runs in a's process %d", pidA)
	}
	if err := p.AddServer(fixtureServerConfig(t, "b")); err == nil || !strings.Contains(err.Error(), `"b" is used twice`) {
		t.Errorf("adding b again: %v, want the id refused", err)
	}

	if err := p.ChangeServers([]string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	waitTool("a__sleep", false)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__sleep", Arguments: map[string]any{"ms": 0}}); err == nil && !res.IsError {
		t.Errorf("a removed server's tool still answers: %s", textOf(res))
	}
	if err := syscall.Kill(pidA, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the removed server's process %d: %v, want it gone", pidA, err)
	}
	var ids []string
	for _, h := range p.Downstreams() {
		ids = append(ids, h.ID)
	}
	if !slices.Equal(ids, []string{"b"}) {
		t.Errorf("Downstreams() %v, want [b]", ids)
	}
	if got := pidOf("b__sleep"); got != pidB {
		t.Errorf("b's process changed from %d to %d when a was removed", pidB, got)
	}
	if err := p.ChangeServers([]string{"a"}, nil); err == nil {
		t.Error("removing a twice: no error")
	}
	// a comes back under its id, as a new process.
	if err := p.AddServer(fixtureServerConfig(t, "a")); err != nil {
		t.Fatal(err)
	}
	waitTool("a__sleep", true)
	if got := pidOf("a__sleep"); got == pidA {
		t.Errorf("a re-added runs in its old process %d", pidA)
	}
}

// TestRemoveServerDrains: a server removed while a call of its slow tool
// is under way (a real stdio server, the fixture) leaves the front at
// once; requests for it that come then are refused, saying it was
// removed, and write nothing; the call under way goes on and its result
// is recorded (finishes), or, when it outlasts the drain's bound, is
// cancelled and recorded as cut short by the removal (cut). Only then is
// the server stopped.
func TestRemoveServerDrains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain time.Duration
		done  bool // the slow tool is let finish
	}{
		{"finishes", time.Hour, true},
		{"cut", 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "a")}, func(o *Options) { o.DrainTimeout = tc.drain })
			cs := connectMemory(t, p, nil)
			ctx := context.Background()
			d := p.downstreams()[0]
			flag := filepath.Join(t.TempDir(), "go-on")
			waitRouted(t, p, "a__wait_file") // its tools entry is in

			before := l.size(t)
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			slow := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__wait_file", Arguments: map[string]any{"path": flag}})
				slow <- answer{res, err}
			}()
			l.waitSize(t, before+1) // its call entry: it is under way
			removed := make(chan error, 1)
			go func() { removed <- p.ChangeServers([]string{"a"}, nil) }()
			for deadline := time.Now().Add(30 * time.Second); p.router.owner(toolNames, "a__wait_file") != nil; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the removed server's tool is still routed")
				}
			}

			// Refused, whichever way a request comes: by name after
			// the removal, or on a server found just before it.
			if tc.done {
				sizeNow := l.size(t)
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ok", Arguments: map[string]any{}})
				if err == nil || !strings.Contains(err.Error(), `server "a" was removed from the configuration`) {
					t.Errorf("a call after the removal: %v, want it refused as removed", err)
				}
				_, rerr := p.serveCall(ctx, &callIn{d: d, tool: "ok", params: &mcp.CallToolParamsRaw{Name: "a__ok"}, start: time.Now()})
				if rerr == nil || !strings.Contains(rerr.Message, "was removed") {
					t.Errorf("a call on the removed server: %v, want it refused as removed", rerr)
				}
				if got := l.size(t); got != sizeNow {
					t.Errorf("the refused calls wrote %d entries", got-sizeNow)
				}
				select {
				case err := <-removed:
					t.Fatalf("RemoveServer returned (%v) while a call was under way", err)
				default:
				}
				if err := os.WriteFile(flag, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-removed; err != nil {
				t.Fatal(err)
			}
			a := <-slow
			e, err := log.ParseEntry(l.entry(t, before+1))
			if err != nil {
				t.Fatal(err)
			}
			cr, err := log.ParseCallResult(e)
			if err != nil || cr.Call != before {
				t.Fatalf("entry %d: %+v, %v: want the call's result", before+1, cr, err)
			}
			if tc.done {
				if a.err != nil || a.res.IsError || textOf(a.res) != "found "+flag {
					t.Errorf("the drained call: %v %v, want its result", a.err, a.res)
				}
				if cr.IsError {
					t.Errorf("its call.result says %q, want its result", cr.Error)
				}
			} else {
				if a.err == nil || !strings.Contains(a.err.Error(), "was removed from the configuration") {
					t.Errorf("the cut call: %v %v, want an error saying the server was removed", a.err, a.res)
				}
				if !cr.IsError || !strings.Contains(cr.Error, "was still under way when the drain's 50ms passed; it was cancelled") {
					t.Errorf("its call.result: %+v, want it recorded as cancelled by the removal", cr)
				}
			}
			if got := l.size(t); got != before+2 {
				t.Errorf("log grew by %d entries, want the call and its result", got-before)
			}
			if d.sup.current() != nil {
				t.Error("the removed server still has a session")
			}
		})
	}
}

// TestRemoveServersDrainTogether: two busy servers (real stdio servers,
// the fixture) removed in one change drain side by side. Both leave the
// front before either call ends; one finishing ends its drain while the
// other's goes on (finishes); when neither finishes, the one bound cuts
// both at once, in one warning that names both (cut), where draining one
// after the other would take a bound each.
func TestRemoveServersDrainTogether(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain time.Duration
		done  bool // the slow tools are let finish
	}{
		{"finishes", time.Hour, true},
		{"cut", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			rec := &recordLogs{}
			p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "a"), fixtureServerConfig(t, "b")}, func(o *Options) {
				o.DrainTimeout = tc.drain
				o.Logger = slog.New(rec)
			})
			cs := connectMemory(t, p, nil)
			ctx := context.Background()
			dir := t.TempDir()
			waitRouted(t, p, "a__wait_file", "b__wait_file") // their tools entries are in
			before := l.size(t)
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			answers := map[string]chan answer{}
			for _, id := range []string{"a", "b"} {
				answers[id] = make(chan answer, 1)
				go func() {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: id + "__wait_file", Arguments: map[string]any{"path": filepath.Join(dir, id)}})
					answers[id] <- answer{res, err}
				}()
			}
			l.waitSize(t, before+2) // both call entries: both are under way
			removed := make(chan error, 1)
			go func() { removed <- p.ChangeServers([]string{"a", "b"}, nil) }()

			if tc.done {
				for deadline := time.Now().Add(30 * time.Second); p.router.owner(toolNames, "a__wait_file") != nil || p.router.owner(toolNames, "b__wait_file") != nil; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("both calls are under way, and a removed server's tool is still routed")
					}
				}
				// b ends first; a's drain goes on.
				if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if a := <-answers["b"]; a.err != nil || a.res.IsError {
					t.Fatalf("b's drained call: %v %v", a.err, a.res)
				}
				select {
				case err := <-removed:
					t.Fatalf("RemoveServers returned (%v) while a's call was under way", err)
				default:
				}
				if err := os.WriteFile(filepath.Join(dir, "a"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if a := <-answers["a"]; a.err != nil || a.res.IsError {
					t.Fatalf("a's drained call: %v %v", a.err, a.res)
				}
			}
			if err := <-removed; err != nil {
				t.Fatal(err)
			}
			if !tc.done {
				for _, id := range []string{"a", "b"} {
					if a := <-answers[id]; a.err == nil || !strings.Contains(a.err.Error(), "was removed from the configuration") {
						t.Errorf("%s's cut call: %v %v, want an error saying the server was removed", id, a.err, a.res)
					}
				}
			}
			if got := l.size(t); got != before+4 {
				t.Fatalf("log grew by %d entries, want two calls and their results", got-before)
			}
			checkDrainedResults(t, l, before+2, before+4, !tc.done)
			want := []string{"removed", "removed"}
			if !tc.done {
				want = append([]string{"cut [a b]"}, want...)
			}
			if got := drainEvents(rec); !slices.Equal(got, want) {
				t.Errorf("events %q, want %q", got, want)
			}
			for _, d := range []string{"a", "b"} {
				if p.router.owner(toolNames, d+"__wait_file") != nil {
					t.Errorf("%s's tool is still routed", d)
				}
			}
		})
	}
}

// waitRouted waits until the front routes every tool of names: their
// servers are up, and their first tools entries are in the log.
func waitRouted(t *testing.T, p *Proxy, names ...string) {
	t.Helper()
	for _, n := range names {
		for deadline := time.Now().Add(time.Minute); p.router.owner(toolNames, n) == nil; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("tool %s is not routed", n)
			}
		}
	}
}

// checkDrainedResults checks that entries [from, to) are call results,
// all cut short by the drain's 100ms bound or none.
func checkDrainedResults(t *testing.T, l *testLog, from, to uint64, cut bool) {
	t.Helper()
	for i := from; i < to; i++ {
		e, err := log.ParseEntry(l.entry(t, i))
		if err != nil {
			t.Fatal(err)
		}
		cr, err := log.ParseCallResult(e)
		if err != nil {
			t.Fatalf("entry %d: %v, want a call's result", i, err)
		}
		isCut := cr.IsError && strings.Contains(cr.Error, "was still under way when the drain's 100ms passed; it was cancelled")
		if isCut != cut {
			t.Errorf("entry %d: %+v; cut %v, want %v", i, cr, isCut, cut)
		}
	}
}

// drainEvents are the drain's cuts ("cut <servers>") and the servers'
// stops ("removed") in the order the proxy logged them.
func drainEvents(rec *recordLogs) []string {
	var events []string
	for _, r := range rec.all() {
		switch r.Message {
		case "proxy: removed servers' calls were still under way at the end of the drain; cancelling them":
			events = append(events, "cut "+attrOf(r, "servers"))
		case "proxy: server removed":
			events = append(events, "removed")
		}
	}
	return events
}

// recordLogs is a slog handler that keeps every record at INFO and above.
type recordLogs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordLogs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *recordLogs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

func (h *recordLogs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLogs) WithGroup(string) slog.Handler      { return h }

func (h *recordLogs) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

// attrOf is the text of r's attribute key.
func attrOf(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// TestInheritKeepsFirstList: a changed server's new instance starts with
// what its old one registered at the front, and a read of its newer
// session's list, which applies the first session's list again with it,
// may come before the new instance's first session is read. The first
// session's list was not inherited, so that read applied an empty one:
// every inherited tool was taken from the older clients until the first
// session's read put them back.
func TestInheritKeepsFirstList(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "lists"
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	old := p.downstreams()[0].cat
	var want []string
	eventuallyTrue(t, "the first session's tools read", func() bool {
		old.mu.Lock()
		defer old.mu.Unlock()
		want = slices.Sorted(maps.Keys(old.lists[toolSlot].reg))
		return old.ended[toolSlot] >= 1 && len(want) > 0
	})
	d := newDownstream(p, cfg)
	c := d.cat
	c.inherit(old)
	p.router.handOver(old.d, d) // as replace does: the front's names are the new instance's
	c.syncMu.Lock()
	// What a read of the newer session's tools applies, as syncList
	// does, before any read of this instance's first session.
	toolKind().apply(c, c.noteNewer(nil, toolSlot, "name", nil), false)
	c.syncMu.Unlock()
	c.mu.Lock()
	got := slices.Sorted(maps.Keys(c.lists[toolSlot].reg))
	var newerOnly []string
	for front, r := range c.lists[toolSlot].reg {
		if r.newerOnly {
			newerOnly = append(newerOnly, front)
		}
	}
	c.mu.Unlock()
	if !slices.Equal(got, want) || len(newerOnly) > 0 {
		t.Errorf("after the newer session's read, the new instance registers %v (newer-only %v), want the old one's %v", got, newerOnly, want)
	}
}

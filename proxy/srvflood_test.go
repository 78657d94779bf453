package proxy

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestServerRequestsBounded: of a stdio server's requests of the client
// (sampling, elicitation, ping), at most maxServerRequests await their
// answers (the server's budget, askbudget.go); one beyond them is answered
// with an error, at most one a second, the rest go unanswered, and none
// reaches the client. go-sdk took every one, each held in its queue or
// waiting for the client: a server's 400,000 sampling requests during one
// call grew the sidecar's heap to 430 MB, 1 KB and more a request. The
// raw server's flood tool sends rawFloodAsks sampling requests and pings
// until one is answered, and says how many were refused by then; the
// client answers none of them before the call ends.
func TestServerRequestsBounded(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	cl := newClientLog()
	var asked atomic.Int64
	cl.sample = func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		asked.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	cs := connectMemory(t, p, cl)
	waitRouted(t, p, "raw__flood")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__flood"})
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	if _, err := fmt.Sscanf(textOf(res), "refused %d", &refused); err != nil || refused < 1 || refused > rawFloodAsks-maxServerRequests {
		t.Errorf("the server was told %q of its %d sampling requests, want 1 to %d refused", textOf(res), rawFloodAsks, rawFloodAsks-maxServerRequests)
	}
	if n := asked.Load(); n > maxServerRequests {
		t.Errorf("the client was asked %d times, want at most %d", n, maxServerRequests)
	}
}

// TestListChurnBounded: a server that changes its tool list and says so
// on and on has the list read at most once every freshFor (here an hour,
// testingOnlyResyncGap), not at once after each notice. Each read of a
// changed list is a tools entry: a server of 2,000 tools changing one
// description without pause had 1,656 tools entries (94 MB) written in a
// minute, and the sidecar busy on a core. The raw server's churn tool
// changes its list rawChurnRounds times, a round each time the proxy
// answers its ping, and says how many lists it gave meanwhile.
func TestListChurnBounded(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "raw__churn")
	for _, d := range p.downstreams() {
		d.cat.testingOnlyResyncGap.Store(int64(time.Hour))
	}
	start := l.size(t)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__churn"})
	if err != nil {
		t.Fatal(err)
	}
	var listed int
	if _, err := fmt.Sscanf(textOf(res), "listed %d", &listed); err != nil {
		t.Fatalf("the churn tool said %q: %v", textOf(res), err)
	}
	tools := 0
	for i := start; i < l.size(t); i++ {
		if e, err := log.ParseEntry(l.entry(t, i)); err == nil && e.Kind == "tools" {
			tools++
		}
	}
	// The first notice is read at once; the next waits out the gap.
	if listed > 1 || tools > 1 {
		t.Errorf("%d changes of the tool list: the server was asked for it %d times, and %d tools entries were written; want at most 1 of each", rawChurnRounds, listed, tools)
	}
}

// TestTrickleRestarts: a stdio server that answers a call a byte a
// millisecond, without end (the raw server's tool "trickle"), has its
// connection ended once the answer has been read for longer than the
// server's call timeout, and is restarted: the call is recorded as
// failed, and the next call is answered by a new process. The answer was
// read on until 16 MiB had come (4.6 hours), and every call meanwhile
// waited its timeout and failed.
func TestTrickleRestarts(t *testing.T) {
	l := newTestLog(t)
	cfg := rawServerConfig(t, "raw")
	cfg.Timeout = 2 * time.Second
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "raw__trickle")
	ctx := context.Background()
	before := l.size(t)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw__trickle"}); err == nil && !res.IsError {
		t.Fatalf("a trickle answered the call: %s", mustJSON(res))
	}
	if e, _ := l.callAt(t, before); e.Fields["is_error"] != true {
		t.Errorf("the trickled call's entry: %v", e.Fields)
	}
	d := p.live["raw"].d
	eventuallyTrue(t, "the server was restarted", func() bool {
		st := d.sup.status()
		return st.state == StateUp && st.restarts > 0
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw__ok"})
	if err != nil || res.IsError || textOf(res) != "ok" {
		t.Errorf("the next call: %v %s", err, mustJSON(res))
	}
}

// TestCallWaitsForRestart: a call made while a stdio server's connection
// is ending (here after the server wrote a message longer than
// maxFrameBytes: its process is given terminateTimeout to exit) waits
// for the server's restart, bounded by its timeout, and is answered by
// the new process. It was sent on the ending connection and failed
// ("closed the connection during the call") for no fault of its own.
func TestCallWaitsForRestart(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "raw__toobig")
	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw__toobig"}); err == nil && !res.IsError {
		t.Fatalf("a message past maxFrameBytes answered the call: %.200s", mustJSON(res))
	}
	before := l.size(t)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw__ok"})
	if err != nil || res.IsError || textOf(res) != "ok" {
		t.Errorf("the call made as the connection ended: %v %.300s", err, mustJSON(res))
	}
	if e, _ := l.callAt(t, before); e.Fields["is_error"] == true {
		t.Errorf("its entry: %v", e.Fields)
	}
}

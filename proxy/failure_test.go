package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestHTTPFront drives the proxy's streamable HTTP front: bearer tokens,
// the body limit, malformed JSON-RPC, both protocol generations and 50
// concurrent clients.
func TestHTTPFront(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}}}, func(o *Options) {
		o.Actor = nil // the token's actor
		o.MaxRequestBytes = 64 << 10
	})
	url := serveHTTP(t, p)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}`
	post := func(token, body string, header map[string]string) (*http.Response, string) {
		h := map[string]string{}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		maps.Copy(h, header)
		return postMCP(t, url, body, h)
	}

	t.Run("Tokens", func(t *testing.T) {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", 401}, {"wrong", 401}, {testToken + "x", 401}, {testToken, 200}} {
			resp, body := post(tc.token, initialize, nil)
			if resp.StatusCode != tc.want {
				t.Errorf("token %q: status %d (%s), want %d", tc.token, resp.StatusCode, body, tc.want)
			}
		}
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 70<<10) + `"}}`
		resp, body := post(testToken, big, nil)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d (%s), want 413", resp.StatusCode, body)
		}
	})

	t.Run("MalformedJSONRPC", func(t *testing.T) {
		before := l.size(t)
		resp, body := post(testToken, initialize, nil)
		sid := resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("no session: %d %s", resp.StatusCode, body)
		}
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
		post(testToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		for _, bad := range []string{
			`{not json`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":5}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"go__test_simple_text"}`,
			`{"jsonrpc":"1.0","id":4,"method":"tools/call","params":{"name":"go__test_simple_text"}}`,
			`[]`,
		} {
			resp, body := post(testToken, bad, h)
			if resp.StatusCode == 200 && !strings.Contains(body, `"error"`) {
				t.Errorf("%s: status %d, body %s: want an error", bad, resp.StatusCode, body)
			}
		}
		if got := l.size(t); got != before {
			t.Errorf("malformed requests were recorded: log grew by %d", got-before)
		}
	})

	t.Run("BothProtocolGenerations", func(t *testing.T) {
		for _, version := range []string{"2024-11-05", "2025-06-18", "2025-11-25", ""} {
			cs := connectHTTP(t, url, version, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "go__test_simple_text"})
			if err != nil || res.IsError {
				t.Fatalf("version %q: %v %s", version, err, mustJSON(res))
			}
			e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
			want := version
			if want == "" {
				want = "2026-07-28"
			}
			if e.Actor != testActor || e.Fields["protocol_version"] != want {
				t.Errorf("version %q: actor %q protocol %v", version, e.Actor, e.Fields["protocol_version"])
			}
			if c, _ := e.Fields["client"].(map[string]any); c["name"] != "go-http-client" {
				t.Errorf("version %q: client %v", version, e.Fields["client"])
			}
		}
	})

	t.Run("FiftyConcurrentClients", func(t *testing.T) {
		const n = 50
		before := l.size(t)
		var wg sync.WaitGroup
		receipts := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				version := "2025-11-25"
				if i%2 == 1 {
					version = "" // 2026-07-28, stateless
				}
				c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("client-%d", i), Version: "1"}, nil)
				tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}
				var opts *mcp.ClientSessionOptions
				if version != "" {
					opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
				}
				cs, err := c.Connect(context.Background(), tr, opts)
				if err != nil {
					errs[i] = err
					return
				}
				defer cs.Close()
				params := &mcp.CallToolParams{Name: "go__test_tool_with_progress"}
				params.SetProgressToken(i)
				res, err := cs.CallTool(context.Background(), params)
				if err != nil {
					errs[i] = err
					return
				}
				receipts[i] = metaReceipt(res.Meta)
			}()
		}
		wg.Wait()
		seen := map[uint64]bool{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("client %d: %v", i, errs[i])
			}
			e, _ := l.checkReceipt(t, receipts[i])
			r, _ := log.ParseReceipt([]byte(receipts[i]))
			if seen[r.Index] {
				t.Errorf("index %d twice", r.Index)
			}
			seen[r.Index] = true
			if c, _ := e.Fields["client"].(map[string]any); c["name"] != fmt.Sprintf("client-%d", i) {
				t.Errorf("client %d's entry names %v", i, e.Fields["client"])
			}
		}
		if got := l.size(t) - before; got != 2*n {
			t.Errorf("log grew by %d, want %d (a call and a call.result per call)", got, 2*n)
		}
	})
}

// killDuringCall makes call on cs, a call to a tool of server id, kills
// the server's process while the call is under way, and checks that the
// client is told the server closed the connection during the call and
// that the call's outcome is recorded so. It returns the killed pid.
func killDuringCall(t *testing.T, p *Proxy, l *testLog, cs *mcp.ClientSession, id string, call *mcp.CallToolParams) int {
	t.Helper()
	pid := p.live[id].d.sup.status().pid
	if pid == 0 {
		t.Fatalf("server %s has no process", id)
	}
	before := l.size(t)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), call)
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-errc:
	case <-time.After(60 * time.Second): // a liveness bound
		t.Fatal("the call did not end after its server was killed")
	}
	var we *jsonrpc.Error
	if !errors.As(err, &we) || !strings.Contains(we.Message, fmt.Sprintf("server %q closed the connection during the call", id)) {
		t.Fatalf("call error: %v", err)
	}
	e, _ := l.callAt(t, before)
	if e.Fields["is_error"] != true || !strings.Contains(e.Fields["error"].(string), "closed the connection") {
		t.Errorf("failed call entry: %v", e.Fields)
	}
	return pid
}

// TestDownstreamKilled kills a stdio server during a call: the call fails
// clearly and is recorded, the server is restarted, later calls work, and
// the other servers never notice.
func TestDownstreamKilled(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        ServerConfig
		long, next *mcp.CallToolParams
	}{
		{"Fixture", fixtureServerConfig(t, "victim"),
			&mcp.CallToolParams{Name: "victim__sleep", Arguments: map[string]any{"ms": 10000}},
			&mcp.CallToolParams{Name: "victim__sleep", Arguments: map[string]any{"ms": 1}}},
		{"ServerEverything", ServerConfig{ID: "victim", Command: everythingJS(t, "stdio")},
			&mcp.CallToolParams{Name: "victim__trigger-long-running-operation", Arguments: map[string]any{"duration": 10, "steps": 10}},
			&mcp.CallToolParams{Name: "victim__get-sum", Arguments: map[string]any{"a": 1, "b": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			p := startProxy(t, l, []ServerConfig{tc.cfg, {ID: "go", Command: []string{goEverything(t)}}}, nil)
			cs := connectMemory(t, p, nil)
			ctx := context.Background()
			pid := killDuringCall(t, p, l, cs, "victim", tc.long)

			// The other server never noticed.
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_simple_text"}); err != nil || res.IsError {
				t.Fatalf("other server: %v", err)
			}
			// The killed one comes back.
			deadline := time.Now().Add(15 * time.Second)
			for {
				res, err := cs.CallTool(ctx, tc.next)
				if err == nil && !res.IsError {
					if strings.Contains(textOf(res), fmt.Sprintf("pid %d", pid)) {
						t.Fatal("answered by the killed process")
					}
					l.checkReceipt(t, metaReceipt(res.Meta))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server did not come back: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			st := serverStatus(t, callStatus(t, cs), "victim")
			if st["state"] != StateUp || st["restarts"].(float64) < 1 {
				t.Errorf("status after the restart: %v", st)
			}
		})
	}
}

// TestStorageFailure makes the log's storage fail: the call is refused
// with an error the client sees, before it is forwarded, and nothing of it
// remains, in the log or the blob store.
func TestStorageFailure(t *testing.T) {
	l := newTestLog(t)
	cfg := fixtureServerConfig(t, "fx")
	cfg.Retain = RetainFull
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"}); err != nil {
		t.Fatal(err)
	}
	blobsBefore := countFiles(t, l.blobDir)
	before := l.size(t)

	l.store.fail.Store(true)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__big"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError || !strings.Contains(we.Message, "was not made, as the log cannot record it") {
		t.Fatalf("call with failing storage: %v %s", err, mustJSON(res))
	}
	if got := l.size(t); got != before {
		t.Errorf("log grew by %d", got-before)
	}
	if got := countFiles(t, l.blobDir); got != blobsBefore {
		t.Errorf("blob store holds %d files, had %d: the unrecorded result was kept", got, blobsBefore)
	}
	// The sequencer stays stopped after a failed commit; later calls fail too.
	l.store.fail.Store(false)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"}); err == nil {
		t.Error("a call succeeded on a stopped log")
	}

	// A Recorder that fails outright behaves the same.
	l2 := newTestLog(t)
	p2 := startProxy(t, l2, []ServerConfig{fixtureServerConfig(t, "fx")}, func(o *Options) { o.Log = failingRecorder{} })
	cs2 := connectMemory(t, p2, nil)
	if _, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"}); !errors.As(err, &we) || !strings.Contains(we.Message, "no space left") {
		t.Fatalf("failing recorder: %v", err)
	}

	// A blob store that fails when the result is to be kept: the call was
	// made and answered, and the log can write, so both its entries are
	// there, the call.result with the result's hash, not retained, and an
	// error saying the result was withheld; the client gets that error
	// (with the receipt) instead of the result.
	l3 := newTestLog(t)
	cfg3 := fixtureServerConfig(t, "fx")
	cfg3.Retain = RetainFull
	p3 := startProxy(t, l3, []ServerConfig{cfg3}, nil)
	cs3 := connectMemory(t, p3, nil)
	if err := os.RemoveAll(l3.blobDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l3.blobDir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	before3 := l3.size(t)
	if _, err := cs3.CallTool(ctx, &mcp.CallToolParams{Name: "fx__big"}); !errors.As(err, &we) || !strings.Contains(we.Message, "its result could not be kept") || !strings.Contains(string(we.Data), ReceiptKey) {
		t.Fatalf("failing blob store: %v", err)
	}
	if got := l3.size(t); got != before3+2 {
		t.Errorf("log grew by %d with a failing blob store, want 2 (the call and its outcome)", got-before3)
	}
	if e, err := log.ParseEntry(l3.entry(t, before3)); err != nil || e.Kind != log.KindCall {
		t.Errorf("entry %d: %v %v, want the call entry", before3, e, err)
	}
	e3, err := log.ParseEntry(l3.entry(t, before3+1))
	if err != nil {
		t.Fatal(err)
	}
	r, err := log.ParseCallResult(e3)
	if err != nil || r.Call != before3 || r.ResultSHA256 == "" || r.ResultRetained || !strings.Contains(r.Error, "provlog withheld the result from the client") {
		t.Errorf("entry %d: %+v %v, want the call's outcome: its result's hash, not retained, withheld", before3+1, r, err)
	}
}

type failingRecorder struct{}

func (failingRecorder) Append(context.Context, []byte) (*log.Receipt, error) {
	return nil, errors.New("no space left on device (test)")
}

func countFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestEmptyPrefixCollision: two servers that keep their names refuse to
// start together when their names collide.
func TestEmptyPrefixCollision(t *testing.T) {
	l := newTestLog(t)
	empty := ""
	a, b := fixtureServerConfig(t, "a"), fixtureServerConfig(t, "b")
	a.Prefix, b.Prefix = &empty, &empty
	_, err := New(context.Background(), Options{Servers: []ServerConfig{a, b}, Log: l.seq, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "collide") || !strings.Contains(err.Error(), "ok") {
		t.Fatalf("New = %v, want a collision error", err)
	}
	// A name the program keeps for a tool of its own (a task tool) is
	// refused too: a server offering create_task took it over.
	_, err = New(context.Background(), Options{Servers: []ServerConfig{a}, Log: l.seq, Logger: testLogger(t), ReservedTools: []string{"ok"}})
	if err == nil || !strings.Contains(err.Error(), "collide") || !strings.Contains(err.Error(), "ok") {
		t.Fatalf("New with a reserved name = %v, want a collision error", err)
	}
	// One alone is fine, and serves the names as given.
	p := startProxy(t, l, []ServerConfig{a}, nil)
	cs := connectMemory(t, p, nil)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ok"}); err != nil || res.IsError {
		t.Fatalf("unprefixed call: %v", err)
	}
}

// TestServerFailsToStart: a server whose command does not exist is
// reported, retried, and does not stop the proxy.
func TestServerFailsToStart(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{
		{ID: "broken", Command: []string{filepath.Join(t.TempDir(), "no-such-server")}},
		fixtureServerConfig(t, "fx"),
	}, nil)
	cs := connectMemory(t, p, nil)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ok"}); err != nil || res.IsError {
		t.Fatalf("working server: %v", err)
	}
	st := serverStatus(t, callStatus(t, cs), "broken")
	if st["state"] != StateDown || !strings.Contains(fmt.Sprint(st["last_error"]), "no-such-server") {
		t.Errorf("broken server status: %v", st)
	}
}

// TestDownServerNamed: a call to a tool of a configured server that never
// connected says that server is not connected, and why; it said "unknown
// tool". A name of no configured server is still unknown.
func TestDownServerNamed(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "dead", Command: []string{"sh", "-c", "exit 3"}}}, func(o *Options) { o.StartTimeout = time.Second })
	cs := connectMemory(t, p, nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "dead__anything"})
	if err == nil || !strings.Contains(err.Error(), `tool "dead__anything": server "dead" is not connected (`) {
		t.Errorf("call to a tool of a down server: %v", err)
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nobody__x"})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "nobody__x"`) {
		t.Errorf("call to a tool of no server: %v", err)
	}
}

// TestStartWaitsOnceForHangingServers: servers that accept connections and
// never answer hold the start for StartTimeout in all, not each in turn
// (after the deadline, the next one was waited for with no bound).
func TestStartWaitsOnceForHangingServers(t *testing.T) {
	var servers []ServerConfig
	for _, id := range []string{"hang1", "hang2"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() }) // read nothing, answer nothing
			}
		}()
		servers = append(servers, ServerConfig{ID: id, URL: "http://" + ln.Addr().String() + "/mcp"})
	}
	l := newTestLog(t)
	started := make(chan *Proxy, 1)
	go func() {
		started <- startProxy(t, l, servers, func(o *Options) { o.StartTimeout = 300 * time.Millisecond })
	}()
	select {
	case p := <-started:
		// Both first attempts still under way: New waited for neither
		// past its deadline (it waited for the second one's own end).
		for _, d := range p.downstreams() {
			select {
			case <-d.sup.firstDone:
				t.Errorf("New waited for %s's first attempt to end", d.cfg.ID)
			default:
			}
		}
		cs := connectMemory(t, p, nil)
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang2__x"}); err == nil || !strings.Contains(err.Error(), `server "hang2" is not connected`) {
			t.Errorf("a call to a server still connecting: %v", err)
		}
	case <-time.After(time.Minute): // a hang, not a speed bound
		t.Fatal("New did not return after its start timeout")
	}
}

package proxy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestHTTPDownstreamRestarted stops an HTTP downstream server and starts it
// again: calls fail (and are recorded) while it is gone, and work again
// once the proxy has reconnected; through the SDK's path (a client in
// memory) and the HTTP front's fast path.
func TestHTTPDownstreamRestarted(t *testing.T) {
	// http: the fast path's POSTs on the proxy's own HTTP/1.1 connections;
	// http-nethttp: on net/http's client (https servers, proxies).
	for _, front := range []string{"memory", "http", "http-nethttp"} {
		t.Run(front, func(t *testing.T) { testHTTPDownstreamRestarted(t, front) })
	}
}

func testHTTPDownstreamRestarted(t *testing.T, front string) {
	netHTTP := front == "http-nethttp"
	if netHTTP {
		front = "http"
	}
	args := everythingJS(t, "streamableHttp")
	port := proctest.FreePort(t)
	start := func() *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		proctest.WaitListening(t, fmt.Sprintf("127.0.0.1:%d", port), "server-everything", nil)
		return cmd
	}
	cmd := start()
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "evh", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}}, func(o *Options) { o.netHTTPOnly = netHTTP })
	h1 := p.live["evh"].d.http1
	if (h1 == nil) != netHTTP {
		t.Fatalf("own HTTP/1.1 connections: %v, want %v", h1 != nil, !netHTTP)
	}
	var cs *mcp.ClientSession
	if front == "http" {
		cs = fastSession(t, p, connectHTTP(t, serveHTTP(t, p), "2025-11-25", nil))
	} else {
		cs = connectMemory(t, p, nil)
	}
	defer func() {
		if n := p.fastCalls.Load(); front == "http" && n < 3 || front == "memory" && n != 0 {
			t.Errorf("%d calls on the fast path from the %s front", n, front)
		}
		if h1 != nil && front == "http" && h1.posts.Load() < 3 {
			t.Errorf("%d POSTs on the proxy's own connections", h1.posts.Load())
		}
	}()
	ctx := context.Background()
	echo := &mcp.CallToolParams{Name: "evh__echo", Arguments: map[string]any{"message": "x"}}
	if _, err := cs.CallTool(ctx, echo); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	before := l.size(t)
	if _, err := cs.CallTool(ctx, echo); err == nil {
		t.Fatal("a call to a stopped server succeeded")
	} else {
		t.Logf("while down: %v", err)
	}
	if l.size(t) != before+2 {
		t.Errorf("the failed call was not recorded (log grew by %d, want a call and its call.result)", l.size(t)-before)
	}
	cmd = start()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := cs.CallTool(ctx, echo)
		if err == nil && !res.IsError {
			l.checkReceipt(t, metaReceipt(res.Meta))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection: %v; status %v", err, serverStatus(t, callStatus(t, cs), "evh"))
		}
		if err != nil && !strings.Contains(err.Error(), "evh") {
			t.Logf("error does not name the server: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHTTPDownstreamRedirectNamed: a server that answers a call with a
// redirect gets the call refused, saying where it points (the error said
// "HTTP 307: " and nothing more); the redirect is not followed.
func TestHTTPDownstreamRedirectNamed(t *testing.T) {
	_, err := callOddDownstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.example/mcp", http.StatusTemporaryRedirect)
	})
	if err == nil || !strings.Contains(err.Error(), "HTTP 307: the server redirects to http://elsewhere.example/mcp") {
		t.Errorf("a redirected call: %v", err)
	}
}

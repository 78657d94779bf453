package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// h1Server is a test server that counts the connections it accepts.
type h1Server struct {
	*httptest.Server
	conns, closed atomic.Int64
	pool          *http1Pool
}

func newH1Server(t *testing.T, h http.HandlerFunc) *h1Server {
	t.Helper()
	s := &h1Server{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL + "/mcp?x=1")
	s.pool = newHTTP1Pool(u)
	if s.pool == nil {
		t.Fatal("no pool for a plain-HTTP URL")
	}
	t.Cleanup(s.pool.closeIdle)
	return s
}

// h1Post posts body and returns the response body read to its end.
func h1Post(ctx context.Context, p *http1Pool, header, body string) (int, string, error) {
	resp, err := p.post(ctx, []byte(header), []byte(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestH1PoolRequests(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s := newH1Server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %s %s %s %d", r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("Mcp-Session-Id"), b, r.ContentLength))
		mu.Unlock()
		switch string(b) {
		case "chunked":
			w.Write([]byte("one,"))
			w.(http.Flusher).Flush()
			w.Write([]byte("two"))
		case "close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "status":
			http.Error(w, "nope", http.StatusTeapot)
		default:
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b)
		}
	})
	ctx := context.Background()
	hdr := "Mcp-Session-Id: s1\r\nContent-Type: application/json\r\n"
	for i := range 20 {
		body := fmt.Sprintf(`{"n":%d}`, i)
		if i%2 == 1 {
			body = "chunked"
		}
		code, got, err := h1Post(ctx, s.pool, hdr, body)
		want := body
		if body == "chunked" {
			want = "one,two"
		}
		if err != nil || code != 200 || got != want {
			t.Fatalf("post %d: %d %q %v, want 200 %q", i, code, got, err, want)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("20 requests took %d connections, want 1", n)
	}
	mu.Lock()
	if want := fmt.Sprintf("POST /mcp?x=1 %s s1 {\"n\":0} 7", strings.TrimPrefix(s.URL, "http://")); seen[0] != want {
		t.Errorf("server saw %q, want %q", seen[0], want)
	}
	mu.Unlock()

	// Connection: close, an error status: answered, and the connection
	// is not used again after the server said close.
	if code, got, err := h1Post(ctx, s.pool, hdr, "close"); err != nil || code != 200 || got != "bye" {
		t.Fatalf("close: %d %q %v", code, got, err)
	}
	if code, got, err := h1Post(ctx, s.pool, hdr, "status"); err != nil || code != http.StatusTeapot || !strings.Contains(got, "nope") {
		t.Fatalf("status: %d %q %v", code, got, err)
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections after Connection: close, want 2", n)
	}
}

func TestH1PoolServerClosedIdleConnections(t *testing.T) {
	s := newH1Server(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) })
	ctx := context.Background()
	for round := range 5 {
		if _, got, err := h1Post(ctx, s.pool, "", "x"); err != nil || got != "x" {
			t.Fatalf("round %d: %q %v", round, got, err)
		}
		// The server drops its idle connections (as Node does after 5 s):
		// the next request must not be written into a closed one.
		s.CloseClientConnections()
		eventuallyTrue(t, "server closed the connection", func() bool { return s.closed.Load() == int64(round+1) })
	}
	if n := s.conns.Load(); n != 5 {
		t.Errorf("%d connections, want 5 (one per round)", n)
	}
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestH1PoolCancelAndUnreadBodies(t *testing.T) {
	release := make(chan struct{})
	s := newH1Server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write([]byte("first;"))
		w.(http.Flusher).Flush()
		if string(b) == "hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("rest"))
	})
	defer close(release)

	// Cancelled while reading the body: the read ends, the connection is
	// not used again.
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := s.pool.post(ctx, nil, []byte("hang"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first;" {
		t.Fatalf("first chunk: %q %v", buf, err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("reading on after cancel did not fail")
	}
	resp.Body.Close()

	// A body closed before its end: the connection is not used again.
	resp, err = s.pool.post(context.Background(), nil, []byte("short"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.pool.mu.Lock()
	idle := len(s.pool.idle)
	s.pool.mu.Unlock()
	if idle != 0 {
		t.Fatalf("%d idle connections after a cancelled and an unread response", idle)
	}

	// A context already done: nothing is sent.
	if _, err := s.pool.post(ctx, nil, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("post with a done context: %v", err)
	}
	if _, got, err := h1Post(context.Background(), s.pool, "", "x"); err != nil || got != "first;rest" {
		t.Fatalf("after: %q %v", got, err)
	}
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestH1PoolErrors(t *testing.T) {
	// Nobody listening: a dial error, which rawHTTPCall takes as the
	// session being gone.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := newHTTP1Pool(&url.URL{Scheme: "http", Host: addr, Path: "/mcp"})
	_, err = p.post(context.Background(), nil, []byte("x"))
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("post to nobody: %v", err)
	}

	// A server that reads the request and hangs up without an answer.
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 4096))
			c.Close()
		}
	}()
	p = newHTTP1Pool(&url.URL{Scheme: "http", Host: l.Addr().String(), Path: "/mcp"})
	if _, err := p.post(context.Background(), nil, []byte("x")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("post to a server that hangs up: %v", err)
	}

	// What the pool is not for.
	for _, u := range []string{"https://example.com/mcp", "http://user:pw@example.com/mcp"} {
		pu, _ := url.Parse(u)
		if newHTTP1Pool(pu) != nil {
			t.Errorf("a pool for %s", u)
		}
	}
}

func TestRenderHeader(t *testing.T) {
	b, err := renderHeader(map[string]string{"X-Api-Key": "k1", "content-type": "text/plain", "Accept": "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := "X-Api-Key: k1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	if string(b) != want {
		t.Errorf("header lines %q, want %q", b, want)
	}
	for _, h := range []map[string]string{
		{"X-Evil": "a\r\nInjected: 1"},
		{"X-Evil": "a\nb"},
		{"Bad Name": "v"},
		{"": "v"},
		{"X:Colon": "v"},
	} {
		if _, err := renderHeader(h); err == nil {
			t.Errorf("renderHeader(%q) accepted", h)
		}
	}
	// Such a server keeps net/http's client, which refuses the header.
	d := newDownstream(&Proxy{}, ServerConfig{ID: "x", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"X-Evil": "a\r\nb"}})
	if d.http1 != nil {
		t.Error("own connections for a server with an invalid header")
	}
}

// FuzzH1Response gives the pool arbitrary bytes as a server's answer: it
// returns a response or an error, never panics or hangs, and does not keep
// a connection whose answer it did not read to a clean end.
func FuzzH1Response(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5\r\ndata:\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\r\n\r\nbody until close"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		p := &http1Pool{prefix: []byte("POST / HTTP/1.1\r\nHost: fuzz\r\n")}
		p.dial = func(ctx context.Context) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				go io.Copy(io.Discard, server)
				server.Write(answer)
				server.Close()
			}()
			return client, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := p.post(ctx, []byte("Accept: */*\r\n"), []byte(`{"x":1}`))
		if err != nil {
			return
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.idle {
			if c.br.Buffered() != 0 {
				t.Fatal("kept a connection with unread bytes")
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the answer took the whole timeout")
		}
	})
}

// FuzzReadResponse holds readResponse to net/http's ReadResponse: what it
// reads, net/http reads the same (status, Content-Type, whether the
// connection closes, the body's bytes), and the reader is left where
// net/http leaves it. It may refuse more (a folded line, say).
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5\r\ndata:\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\nContent-Length: 9\r\n\r\n2;ext=1\r\nab\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nokEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody until close",
		"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 404\nConnection: foo, close\nContent-Type: text/plain; charset=utf-8\n\n",
		"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		mine, err := readResponse(bufio.NewReader(bytes.NewReader(answer)))
		if err != nil {
			return
		}
		theirBR := bufio.NewReader(bytes.NewReader(answer))
		their, err := http.ReadResponse(theirBR, &http.Request{Method: http.MethodPost})
		if err != nil {
			t.Fatalf("readResponse took what net/http refuses (%v)", err)
		}
		if mine.StatusCode != their.StatusCode || mine.Header.Get("Content-Type") != their.Header.Get("Content-Type") {
			t.Fatalf("status %d %q, net/http %d %q", mine.StatusCode, mine.Header.Get("Content-Type"), their.StatusCode, their.Header.Get("Content-Type"))
		}
		mb, merr := io.ReadAll(mine.Body)
		tb, terr := io.ReadAll(their.Body)
		if merr != nil {
			return // cut or malformed: nothing is kept of it
		}
		if !bytes.Equal(mb, tb) {
			t.Fatalf("body %q, net/http %q (%v)", mb, tb, terr)
		}
		if terr == nil && mine.Close != their.Close {
			t.Fatalf("close %v, net/http %v", mine.Close, their.Close)
		}
		if terr == nil && !mine.Close {
			// The next response starts where net/http's would.
			rest, _ := io.ReadAll(theirBR)
			if !bytes.HasSuffix(answer, rest) || len(answer)-len(rest) != consumed(t, answer) {
				t.Fatalf("readResponse stopped elsewhere than net/http")
			}
		}
	})
}

// consumed is how many bytes of answer readResponse reads with its body.
func consumed(t *testing.T, answer []byte) int {
	r := bytes.NewReader(answer)
	br := bufio.NewReader(r)
	resp, err := readResponse(br)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	return len(answer) - r.Len() - br.Buffered()
}

func TestReadResponseRefuses(t *testing.T) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 200OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("y", maxResponseHead) + "\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
	} {
		if _, err := readResponse(bufio.NewReader(strings.NewReader(s))); err == nil {
			t.Errorf("readResponse took %.80q", s)
		}
	}
	// A body cut short is an error, not a shorter body.
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\nX-Trailer: 1\r\n",
	} {
		resp, err := readResponse(bufio.NewReader(strings.NewReader(s)))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if b, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: body %q, %v; want io.ErrUnexpectedEOF", s, b, err)
		}
	}
}

package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// http1Pool makes the fast path's POSTs to one plain-HTTP downstream: HTTP/1.1
// over keep-alive connections it holds itself, written and read on the
// calling goroutine. net/http's client hands every request to two
// goroutines of its connection (a writer and a reader) and back; at a few
// thousand calls a second those hand-offs and its bookkeeping cost more CPU
// than the bytes. Responses are read by readResponse (http1resp.go).
// Anything but plain http without a proxy keeps net/http's client.
type http1Pool struct {
	prefix []byte // request line and Host header
	dial   func(ctx context.Context) (net.Conn, error)

	mu   sync.Mutex
	idle []*http1Conn // the most recently used last

	posts atomic.Uint64 // for tests
}

type http1Conn struct {
	nc    net.Conn
	peek  *peeker // whether it is still open while idle
	br    *bufio.Reader
	buf   []byte    // the request being written
	since time.Time // idle since
}

const (
	h1MaxIdle     = 512
	h1IdleTimeout = 90 * time.Second
)

// newHTTP1Pool returns a pool for u, or nil if net/http's client should make
// the requests: for https, or when the environment names a proxy for u.
func newHTTP1Pool(u *url.URL) *http1Pool {
	if u.Scheme != "http" || u.User != nil {
		return nil
	}
	if pu, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || pu != nil {
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	target := u.EscapedPath()
	if target == "" {
		target = "/"
	}
	if u.RawQuery != "" {
		target += "?" + u.RawQuery
	}
	if !validHeaderValue(target) || !validHeaderValue(u.Host) {
		return nil
	}
	p := &http1Pool{}
	p.prefix = []byte("POST " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\n")
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	p.dial = func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	return p
}

// validHeaderValue reports whether s can go into a request line or header
// value as it is: no control characters (CR and LF above all).
func validHeaderValue[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// get returns an idle connection that is still open, or dials a new one.
func (p *http1Pool) get(ctx context.Context) (*http1Conn, error) {
	now := time.Now()
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		// The server may have closed it while it sat idle (Node closes
		// idle connections after 5 s): a request written to it would be
		// lost in a way that looks like a crash mid-call, so look first.
		if now.Sub(c.since) < h1IdleTimeout && c.peek.alive() {
			return c, nil
		}
		c.nc.Close()
	}
	nc, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &http1Conn{nc: nc, peek: newPeeker(nc), br: bufio.NewReaderSize(nc, 8<<10)}, nil
}

func (p *http1Pool) put(c *http1Conn) {
	c.since = time.Now()
	p.mu.Lock()
	if len(p.idle) < h1MaxIdle {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
}

// closeIdle closes every idle connection.
func (p *http1Pool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

// longAgo is a deadline that has passed: setting it ends a blocked read.
var longAgo = time.Unix(1, 0)

// post sends a POST with the given header lines (each "Name: value\r\n",
// valid) and body, and returns the response. Its body must be closed; the
// connection is used again only if the body was read to its end, the
// server did not ask to close, and ctx did not end.
func (p *http1Pool) post(ctx context.Context, header, body []byte) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.posts.Add(1)
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(longAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	b := append(c.buf[:0], p.prefix...)
	b = append(b, header...)
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	if cap(b) <= 64<<10 {
		c.buf = b // keep a small buffer for the next request
	}
	if _, err := c.nc.Write(b); err != nil {
		return fail(err)
	}
	resp, err := readResponse(c.br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the server closed without an answer
		}
		return fail(err)
	}
	resp.Body = &http1Body{rc: resp.Body, p: p, c: c, stop: stop, keep: !resp.Close}
	return resp, nil
}

// http1Body is a response body that gives its connection back when closed.
type http1Body struct {
	rc   io.ReadCloser
	p    *http1Pool
	c    *http1Conn
	stop func() bool
	keep bool // the server did not say Connection: close
	eof  bool
	done bool
}

func (b *http1Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

func (b *http1Body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop reports false once ctx's AfterFunc has run (or runs): the
	// connection's deadline is then in the past.
	if b.stop() && b.eof && b.keep && b.c.br.Buffered() == 0 {
		b.p.put(b.c)
	} else {
		b.c.nc.Close()
	}
	return nil
}

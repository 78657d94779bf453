package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The pipe front (stdio, and the tests' in-memory pipe): go-sdk's own
// newline-delimited JSON connection over what the front does not serve
// itself (stdiofront.go). Only the connection sees the JSON-RPC ids of
// what the SDK serves, so idConn wraps it: it holds the id of each
// request the SDK takes among the pipe front's (frontids.go), refusing
// one under an id in progress, and frees it as the answer goes out; and,
// while tracing, each request that gets a span must carry its id to the
// handlers (trace.go), which idConn puts in the request's RequestExtra.
//
// The wrapper hides the SDK connection's unexported session hook, which
// the SDK needs for one thing: refusing a JSON-RPC batch on a session of
// protocol 2025-06-18 or later (the connection's read fails, which ends
// the session, which on stdio ended the sidecar). So the pipe front
// notes the session's revision from the answer to initialize idConn
// passes on, and refuses such a batch before the SDK sees it (refuse): it
// answers the batch with an error, and the session goes on. A batch read
// after an initialize request the front passed on waits for its answer,
// and so for the revision (noteInitialize). Only a batch the SDK read
// before any initialize (one holding it, say) is left to idConn, which
// ends the session as the SDK does, knowing whether a message came in a
// batch from frameTap, which notes the shape of each JSON value the SDK's
// connection reads. Tracing changes nothing about what is served and what
// refused (TestPipeBatchTracing).

// ServeStdio serves one client over stdin and stdout until it disconnects
// or ctx is done.
func (p *Proxy) ServeStdio(ctx context.Context) error {
	return p.servePipe(ctx, os.Stdin, noClose{os.Stdout})
}

// servePipe is ServeStdio over r and w.
func (p *Proxy) servePipe(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	ss, err := p.connectPipe(ctx, r, w)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		p.stopping.Store(true)
		p.logger.Info("proxy: stopping: closing the stdio session; calls under way are cut off and recorded as such")
		ss.Close()
		<-ended
		return ctx.Err()
	case err := <-ended:
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syntax) || errors.As(err, &typ) {
			return fmt.Errorf("the client on stdin sent something that is not a JSON-RPC message, which ends its session: %w", err)
		}
		return err
	}
}

// noClose is a writer whose Close does nothing (the front's stdout).
type noClose struct{ io.Writer }

func (noClose) Close() error { return nil }

// batchingRefusedFrom is the first revision on which the SDK refuses a
// JSON-RPC batch.
const batchingRefusedFrom = "2025-06-18"

type idTransport struct {
	r     io.ReadCloser
	w     io.WriteCloser
	f     *pipeFront
	trace bool
}

func (t *idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	tap := &frameTap{r: t.r}
	c, err := (&mcp.IOTransport{Reader: tap, Writer: t.w}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &idConn{Connection: c, tap: tap, f: t.f, trace: t.trace, held: new(sdkRequest)}, nil
}

// idConn holds the id of each request the SDK takes, refusing one under
// an id in progress; hands the id of each request that gets a span over
// in its RequestExtra, while tracing (the others' Extra stays nil, as the
// SDK made it); and refuses batches as the SDK's connection would.
type idConn struct {
	mcp.Connection
	tap   *frameTap
	f     *pipeFront
	trace bool
	held  *sdkRequest // what holds the ids of the requests the SDK serves

	// Read's own (reads are serialized).
	left  int  // messages of the current JSON value still to come
	batch bool // the current value is a batch

	mu       sync.Mutex
	initID   jsonrpc.ID // the initialize request's, once read
	initSeen bool
}

func (c *idConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		m, err := c.read(ctx)
		r, ok := m.(*jsonrpc.Request)
		if err != nil || !ok || !r.IsCall() || c.f.ids.claim(sdkKey(r.ID), c.held) {
			return m, err
		}
		id, _ := json.Marshal(r.ID.Raw())
		c.f.refuseDuplicate(id)
		if r.Method == "initialize" {
			c.f.initAnswered()
		}
	}
}

// read reads the next message the SDK gets.
func (c *idConn) read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil {
		return m, err
	}
	if c.left == 0 {
		c.batch, c.left = c.tap.next()
	}
	c.left--
	if rev := c.f.sessionRevision(); c.batch && rev >= batchingRefusedFrom {
		return nil, errors.New(batchRefused(rev))
	}
	r, ok := m.(*jsonrpc.Request)
	if !ok || !r.IsCall() {
		return m, nil
	}
	if r.Method == "initialize" {
		c.mu.Lock()
		c.initID, c.initSeen = r.ID, true
		c.mu.Unlock()
	}
	if c.trace && r.Extra == nil && tracedMethod(r.Method) {
		if id, err := json.Marshal(r.ID.Raw()); err == nil {
			r.Extra = &mcp.RequestExtra{Header: http.Header{frontIDHeader: {string(id)}, frontPipeHeader: {"1"}}}
		}
	}
	return m, nil
}

// Write frees the id of an answer before it goes out, as the SDK frees
// its own (the client may use it again as soon as it has the answer), and
// notes the session's revision from the answer to initialize before then,
// as the SDK notes it.
func (c *idConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Response); ok && r.ID.IsValid() {
		c.f.ids.freeSDK(sdkKey(r.ID), c.held)
	}
	if r, ok := m.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if c.initSeen && r.ID == c.initID {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if r.Error == nil && json.Unmarshal(r.Result, &res) == nil {
				c.f.revision.Store(&res.ProtocolVersion)
			}
			c.f.initAnswered()
		}
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, m)
}

// sessionRevision is the revision the session was initialized at, once
// initialize was answered, else "".
func (f *pipeFront) sessionRevision() string {
	if r := f.revision.Load(); r != nil {
		return *r
	}
	return ""
}

// batchRefused says why a batch is refused on a session of revision rev,
// as the SDK says it.
func batchRefused(rev string) string {
	return fmt.Sprintf("JSON-RPC batching is not supported in %s and later (request version: %s)", batchingRefusedFrom, rev)
}

// A frameTap passes a pipe's bytes on to the SDK's connection and notes,
// for each top-level JSON value in them, whether it is a batch (an array)
// and how many messages it holds; a value that is neither an object nor
// an array ends the connection there (the SDK cannot read it), and the tap
// stops looking. It scans each byte once, keeping only its depth.
type frameTap struct {
	r io.ReadCloser

	// The scan (only the SDK's reading goroutine calls Read).
	depth  int
	inStr  bool
	esc    bool
	array  bool // the value being scanned is an array
	expect bool // in an array, before an element
	n      int  // its elements so far
	dead   bool

	mu     sync.Mutex
	frames []frame // scanned, not yet read by idConn
}

type frame struct {
	batch bool
	n     int
}

func (t *frameTap) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	for _, c := range b[:n] {
		t.scan(c)
	}
	return n, err
}

func (t *frameTap) Close() error { return t.r.Close() }

// scan takes the next byte of the stream.
func (t *frameTap) scan(c byte) {
	if t.dead {
		return
	}
	if t.inStr {
		switch {
		case t.esc:
			t.esc = false
		case c == '\\':
			t.esc = true
		case c == '"':
			t.inStr = false
		}
		return
	}
	if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
		return
	}
	if t.depth == 1 && t.array && t.expect && c != ']' {
		t.n++
		t.expect = false
	}
	switch c {
	case '{', '[':
		if t.depth == 0 {
			t.array, t.expect, t.n = c == '[', c == '[', 0
			if c == '{' {
				t.n = 1
			}
		}
		t.depth++
	case '}', ']':
		t.depth--
		switch {
		case t.depth < 0:
			t.dead = true
		case t.depth == 0:
			t.mu.Lock()
			t.frames = append(t.frames, frame{t.array, t.n})
			t.mu.Unlock()
		}
	case ',':
		if t.depth == 1 && t.array {
			t.expect = true
		}
	case '"':
		t.inStr = true
		if t.depth == 0 {
			t.dead = true
		}
	default:
		if t.depth == 0 {
			t.dead = true
		}
	}
}

// next is the shape of the next value the SDK's connection read: whether
// it is a batch, and how many messages it holds.
func (t *frameTap) next() (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.frames) == 0 {
		return false, 1 // not scanned (cannot happen: a value is scanned before it is decoded)
	}
	f := t.frames[0]
	t.frames = t.frames[1:]
	if f.n < 1 {
		f.n = 1
	}
	return f.batch, f.n
}

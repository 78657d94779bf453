package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A stdio server's connection.
//
// go-sdk's stdio connection (IOTransport) decodes each message a server
// writes with its own decoder, twice (as a batch, then as a message), each
// time with a fresh 32 KiB buffer: some 40 µs a message, whatever its
// size. It ends the connection on an answer nested deeper than its
// decoder reads (1,000 levels), cutting off every call in flight, and the
// server is restarted. The proxy reads a stdio server's output itself, as
// it reads an HTTP server's answers: stdioConn takes each value off the
// stream (downReader) and reads each message with parseWire, which makes
// an answer's result's canonical form, hashed by the call's entry, in the
// same pass, and reads a request or notification of the server's as
// go-sdk's jsonrpc does (FuzzDecodeDownAsSDK); go-sdk's decoder reads
// only one that names a method and is not I-JSON. An answer parseWire
// cannot read (nested past encoding/json's bound) fails its call alone:
// go-sdk reads an error answer to its id in its place, and the call's
// capture why. What is no
// JSON-RPC message (bytes that begin no value, a request go-sdk cannot
// read, a value past maxFrameBytes) ends the connection, as before; so
// does a message not read whole within the server's call timeout (a
// server that trickles a message a byte at a time would otherwise keep
// every later call waiting behind it until 16 MiB came, hours).
// Writes are go-sdk's jsonrpc encoding, a line each; a batch of the
// server's requests is answered with one batch, as go-sdk answers it.

// sdkMaxDepth is the deepest nesting go-sdk's decoding of a JSON-RPC
// message reads (its internal/json's defaultMaxDepth).
const sdkMaxDepth = 1000

// deepStandIn is the message of the error answer go-sdk reads in place of
// an answer the proxy read for it, or could not read.
const deepStandIn = "provlog: an answer nested deeper than go-sdk reads"

// A downReader takes the values of a stdio server's output off the stream,
// one after another: JSON objects or arrays, each ending its line (white
// space may follow it there), on one line or many.
type downReader struct {
	r io.Reader
	window
	sc    valueScanner
	after bool // a value ended, and its line has not
	// late, if set, is called when a value has been read for longer than
	// bound and has not ended (once a value spans reads, a timer is set).
	late  func()
	bound time.Duration
	timer *time.Timer
}

func newDownReader(r io.Reader) *downReader {
	return &downReader{r: r, window: window{val: -1}}
}

// next returns the next value, which is valid until next is called again.
func (d *downReader) next() ([]byte, error) {
	for {
		if v, err := d.scan(); v != nil || err != nil {
			return v, err
		}
		if d.err != nil {
			if d.val >= 0 && errors.Is(d.err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, d.err
		}
		if d.val >= 0 && d.late != nil && d.timer == nil {
			d.timer = time.AfterFunc(d.bound, d.late)
		}
		if d.fill(d.r); d.passing {
			return nil, fmt.Errorf("the server wrote a message longer than %d MiB", maxFrameBytes>>20)
		}
	}
}

// scan scans what is buffered, and returns the value it completes, if
// any.
func (d *downReader) scan() ([]byte, error) {
	for d.pos < d.n {
		if d.val < 0 {
			switch c := d.buf[d.pos]; {
			case c == '\n' || c == '\r':
				d.after = false
				d.pos++
				continue
			case c == ' ' || c == '\t':
				d.pos++
				continue
			case d.after:
				return nil, fmt.Errorf("invalid trailing data after a message: %q", c)
			case c == '{' || c == '[':
				d.val, d.start, d.sc = d.pos, d.pos, valueScanner{spans: true}
			default:
				return nil, fmt.Errorf("invalid character %q looking for beginning of value", c)
			}
		}
		end, _ := d.sc.scan(d.buf[d.pos:d.n])
		if end < 0 {
			d.pos = d.n
			return nil, nil
		}
		end += d.pos
		v := d.buf[d.val:end]
		d.start, d.pos, d.val, d.after = end, end, -1, true
		if d.timer != nil {
			d.timer.Stop()
			d.timer = nil
		}
		return v, nil
	}
	if d.val < 0 {
		d.start = d.pos
	}
	return nil, nil
}

// A downRead is a message a stdio server wrote, as stdioConn read it.
type downRead struct {
	msg   jsonrpc.Message
	canon []byte // an answer's result's canonical form, if it has one
	// unread is why an answer could not be read: msg is then an error
	// answer to its id, in its place (deepStandIn).
	unread error
}

// decodeDown reads v, a value a stdio server wrote: one message, or a
// batch of them (batch set).
func decodeDown(v []byte) (rs []downRead, batch bool, err error) {
	if v[0] != '[' {
		r, err := decodeDownOne(v)
		return []downRead{r}, false, err
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		return nil, true, fmt.Errorf("unmarshaling a batch: %w", err)
	}
	if len(elems) == 0 {
		return nil, true, errors.New("empty batch")
	}
	rs = make([]downRead, len(elems))
	for i, e := range elems {
		if rs[i], err = decodeDownOne(e); err != nil {
			return nil, true, err
		}
	}
	return rs, true, nil
}

// decodeDownOne reads v, one message, with parseWire: an answer, or a
// request or notification of the server's, as go-sdk's jsonrpc reads it;
// one that is not I-JSON that names a method go-sdk's jsonrpc decodes.
func decodeDownOne(v []byte) (downRead, error) {
	w, err := parseWire(v)
	switch {
	case err != nil:
		stand, id, ok := standInFor(v)
		if !ok {
			return downRead{}, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return downRead{msg: &jsonrpc.Response{ID: id, Error: stand}, unread: err}, nil
	case !w.walked && w.named:
		m, err := jsonrpc.DecodeMessage(v)
		return downRead{msg: m}, err
	case w.Version != "2.0":
		return downRead{}, fmt.Errorf("invalid message version tag %q; expected %q", w.Version, "2.0")
	case w.named:
		var id jsonrpc.ID
		if len(w.ID) > 0 && string(w.ID) != "null" {
			var ok bool
			if id, ok = answerID(w.ID); !ok {
				return downRead{}, fmt.Errorf("invalid ID %.40s", w.ID)
			}
		}
		return downRead{msg: &jsonrpc.Request{ID: id, Method: w.Method, Params: w.Params}}, nil
	}
	id, ok := answerID(w.ID)
	if !ok {
		return downRead{}, errNoAnswerID
	}
	return downRead{msg: w.response(id), canon: w.resultCanon}, nil
}

// errNoAnswerID is what is wrong with an answer whose id go-sdk does not
// read as one.
var errNoAnswerID = errors.New("invalid request: an answer with no id")

// answerID is the id raw, an answer's, as go-sdk reads it (MakeID of its
// decoding), and false if it is none.
func answerID(raw json.RawMessage) (jsonrpc.ID, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil && id.IsValid()
}

// standInFor returns the error answer go-sdk reads in place of v, an
// answer (a message with an id and no method) the proxy reads for it or
// cannot read, and its id; false if v is no answer.
func standInFor(v []byte) (*jsonrpc.Error, jsonrpc.ID, bool) {
	rawID, found := topMember(v, "id")
	if !found || v[0] != '{' || namesMethod(v) {
		return nil, jsonrpc.ID{}, false
	}
	id, ok := answerID(rawID)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: deepStandIn}, id, ok
}

// deepParams stands in for the params of a server's request or
// notification nested deeper than go-sdk reads (shallowed): a string where
// go-sdk wants an object, so that its decoding of the params fails and it
// answers such a request as one whose params it cannot read (-32602),
// where the message whole would have ended its connection.
const deepParams = `"provlog: a message nested deeper than go-sdk reads"`

// shallowed returns what go-sdk reads in place of v, a server's request
// or notification nested deeper than it reads: its id and method, its
// params deepParams; false if v is none (its method no string, its id no
// id).
func shallowed(v []byte) ([]byte, bool) {
	rawMethod, ok := topMember(v, "method")
	var method string
	if !ok || json.Unmarshal(rawMethod, &method) != nil {
		return nil, false
	}
	var idJSON []byte // nil: a notification
	if rawID, found := topMember(v, "id"); found && string(rawID) != "null" {
		id, ok := answerID(rawID)
		if !ok {
			return nil, false
		}
		idJSON, _ = json.Marshal(id.Raw())
	}
	// Written here, not by go-sdk's encoding, which leaves out a method
	// that is "" (go-sdk reads one that is there as a request).
	return appendRequest(nil, idJSON, method, []byte(deepParams)), true
}

// response is w, an answer, as go-sdk's message, under id.
func (w *wireMessage) response(id jsonrpc.ID) *jsonrpc.Response {
	if w.Error != nil {
		return &jsonrpc.Response{ID: id, Error: w.Error}
	}
	return &jsonrpc.Response{ID: id, Result: w.Result}
}

// A heldAnswer is an answer an HTTP server's tee kept from go-sdk: as
// parseWire read it, or why it could not.
type heldAnswer struct {
	msg *jsonrpc.Response
	err error
}

// heldDeep reads v, a value nested deeper than go-sdk reads, if it is
// an answer (a message with an id and no method): it returns what go-sdk
// gets in its place, an error answer to its id (deepStandIn), and the
// answer as parseWire reads it, or why it cannot. ok is false for
// anything else.
func heldDeep(v []byte) (stand []byte, h heldAnswer, id jsonrpc.ID, ok bool) {
	serr, id, ok := standInFor(v)
	if !ok {
		return nil, h, id, false
	}
	stand, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: serr})
	if w, err := parseWire(v); err != nil {
		h.err = err
	} else {
		h.msg = w.response(id)
	}
	return stand, h, id, true
}

// pastSDKDepth reports whether data, a JSON value, nests deeper than
// go-sdk reads. Most values hold too few brackets to, which a count
// tells.
func pastSDKDepth(data []byte) bool {
	if bytes.Count(data, []byte("{"))+bytes.Count(data, []byte("[")) <= sdkMaxDepth {
		return false
	}
	i := skipSpace(data, 0)
	if i == len(data) || (data[i] != '{' && data[i] != '[') {
		return false
	}
	sc := valueScanner{spans: true}
	sc.scan(data[i:])
	return sc.max > sdkMaxDepth
}

// stdioConn is go-sdk's connection to a stdio server (see above).
type stdioConn struct {
	in        *downReader
	out       io.WriteCloser // the server's stdin (processStdin)
	reads     chan stdioRead
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	queue     []downRead // the rest of a batch

	wmu     sync.Mutex
	batches map[jsonrpc.ID]*replyBatch // the server's batched requests not yet answered

	stalled   chan struct{} // closed when a message was not read whole within its bound
	stallOnce sync.Once
	stallErr  error
}

type stdioRead struct {
	rs    []downRead
	batch bool
	err   error
}

// A replyBatch is the answers to a batch of the server's requests,
// written together once each is in.
type replyBatch struct {
	unanswered map[jsonrpc.ID]int // a request's id: its answer's place
	replies    []*jsonrpc.Response
}

// newStdioConn connects to a server whose output is stdout and input
// stdin; a message of its not read whole within bound (0: no bound) ends
// the connection.
func newStdioConn(stdout io.Reader, stdin io.WriteCloser, bound time.Duration) *stdioConn {
	c := &stdioConn{in: newDownReader(stdout), out: stdin, reads: make(chan stdioRead), closed: make(chan struct{}), stalled: make(chan struct{})}
	if bound > 0 {
		c.in.bound = bound
		c.stallErr = fmt.Errorf("the server wrote a message it did not end within %s, its call timeout", bound)
		c.in.late = func() { c.stallOnce.Do(func() { close(c.stalled) }) }
	}
	// Read on a goroutine of its own, so that Close ends a Read waiting
	// (as go-sdk's: a pipe's read is not ended by closing it).
	go func() {
		for {
			var r stdioRead
			v, err := c.in.next()
			if r.err = err; err == nil {
				r.rs, r.batch, r.err = decodeDown(v)
			}
			select {
			case c.reads <- r:
			case <-c.closed:
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	return c
}

// read returns the next message the server wrote.
func (c *stdioConn) read(ctx context.Context) (downRead, error) {
	if err := ctx.Err(); err != nil {
		return downRead{}, err
	}
	if len(c.queue) > 0 {
		r := c.queue[0]
		c.queue = c.queue[1:]
		return r, nil
	}
	select {
	case <-ctx.Done():
		return downRead{}, ctx.Err()
	case <-c.closed:
		return downRead{}, io.EOF
	case <-c.stalled:
		return downRead{}, c.stallErr
	case r := <-c.reads:
		if r.err != nil {
			return downRead{}, r.err
		}
		if r.batch {
			if err := c.addBatch(r.rs); err != nil {
				return downRead{}, err
			}
		}
		c.queue = r.rs[1:]
		return r.rs[0], nil
	}
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	r, err := c.read(ctx)
	return r.msg, err
}

// addBatch notes the requests of a batch, to be answered together.
func (c *stdioConn) addBatch(rs []downRead) error {
	b := &replyBatch{unanswered: map[jsonrpc.ID]int{}}
	for _, r := range rs {
		if req, ok := r.msg.(*jsonrpc.Request); ok && req.IsCall() {
			if _, dup := b.unanswered[req.ID]; dup {
				return fmt.Errorf("duplicate message ID %v in a batch", req.ID.Raw())
			}
			b.unanswered[req.ID] = len(b.replies)
			b.replies = append(b.replies, nil)
		}
	}
	if len(b.replies) == 0 {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for id := range b.unanswered {
		if _, ok := c.batches[id]; ok {
			return fmt.Errorf("invalid request: a batch holds request %v, which is not yet answered", id.Raw())
		}
	}
	if c.batches == nil {
		c.batches = map[jsonrpc.ID]*replyBatch{}
	}
	for id := range b.unanswered {
		c.batches[id] = b
	}
	return nil
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var data []byte
	var err error
	if r, ok := msg.(*jsonrpc.Response); ok && c.batches[r.ID] != nil {
		b := c.batches[r.ID]
		delete(c.batches, r.ID)
		b.replies[b.unanswered[r.ID]] = r
		if delete(b.unanswered, r.ID); len(b.unanswered) > 0 {
			return nil
		}
		data = []byte{'['}
		for i, r := range b.replies {
			m, merr := jsonrpc.EncodeMessage(r)
			if err = merr; err != nil {
				break
			}
			if i > 0 {
				data = append(data, ',')
			}
			data = append(data, m...)
		}
		data = append(data, ']')
	} else {
		data, err = jsonrpc.EncodeMessage(msg)
	}
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	_, err = c.out.Write(append(data, '\n'))
	return err
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.out.Close()
		close(c.closed)
	})
	return c.closeErr
}

func (c *stdioConn) SessionID() string { return "" }

// commandTransport starts a stdio server's process as go-sdk's
// CommandTransport does, and connects to it (stdioConn).
type commandTransport struct {
	cmd   *process
	bound time.Duration // the server's call timeout, which bounds the read of a message
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := startProcess(t.cmd); err != nil {
		return nil, err
	}
	return newStdioConn(stdout, processStdin{stdin, t.cmd}, t.bound), nil
}

// processStdin is a stdio server's stdin, whose Close ends the server as
// go-sdk's CommandTransport does (MCP, Transports, stdio, Shutdown):
// stdin closed, then SIGTERM if it has not exited within
// terminateTimeout, then SIGKILL.
type processStdin struct {
	io.WriteCloser
	cmd *process
}

func (s processStdin) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(terminateTimeout):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return fmt.Errorf("unresponsive subprocess")
}

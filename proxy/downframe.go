package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Answers nested deeper than go-sdk reads, from a stdio server.
//
// go-sdk's stdio connection reads a server's stdout as JSON values one
// after another (encoding/json, which stops at 10,000 levels) and decodes
// each message (its own decoder, which stops at 1,000); either failure
// ends the connection, cutting off every call in flight on it, and the
// server is restarted. An HTTP server's answers the proxy reads itself
// (parseWire): a result within encoding/json's bound is passed on as
// received, and an answer nested deeper fails its call alone, saying so.
// A deepReader stands between a stdio server's stdout and go-sdk's
// connection so that a stdio server's answers are taken the same way: it
// passes every value on as it came, but an answer (a message with an id
// and no method) nested deeper than go-sdk reads, which it holds for the
// capture (captureConn) as parseWire reads it, or with why parseWire
// cannot, and replaces, for go-sdk, with an error answer to the same id
// (deepStandIn). Anything else (a request so deep, a value past go-sdk's
// size limit, bytes that begin no value) goes on as it came, and go-sdk
// ends the connection as before. Each byte is scanned once.

// sdkMaxDepth is the deepest nesting go-sdk's decoding of a JSON-RPC
// message reads (its internal/json's defaultMaxDepth).
const sdkMaxDepth = 1000

// deepStandIn is the message of the error answer go-sdk gets in place of
// one the deepReader held.
const deepStandIn = "provlog: an answer nested deeper than go-sdk reads"

// A deepReader is go-sdk's view of a stdio server's stdout.
type deepReader struct {
	r io.Reader
	window
	sc valueScanner

	mu   sync.Mutex
	held map[jsonrpc.ID]heldAnswer
}

// A heldAnswer is an answer a deepReader kept from go-sdk: as parseWire
// read it, or why it could not.
type heldAnswer struct {
	msg *jsonrpc.Response
	err error
}

func newDeepReader(r io.Reader) *deepReader {
	return &deepReader{r: r, window: window{val: -1}, held: map[jsonrpc.ID]heldAnswer{}}
}

func (d *deepReader) Read(b []byte) (int, error) {
	for {
		if len(d.out) > 0 {
			n := copy(b, d.out)
			d.out = d.out[n:]
			return n, nil
		}
		if d.start < d.n && (d.passing || d.err != nil) {
			d.out, d.start = d.buf[d.start:d.n], d.n
			continue
		}
		if d.err != nil {
			return 0, d.err
		}
		if d.passing {
			return d.r.Read(b)
		}
		if !d.scan() && !d.passing {
			d.fill(d.r)
		}
	}
}

// scan scans what is buffered, and reports whether it made bytes ready
// for go-sdk (in out): a value and the white space before it.
func (d *deepReader) scan() bool {
	for d.pos < d.n {
		if d.val < 0 {
			switch d.buf[d.pos] {
			case ' ', '\t', '\n', '\r':
				d.pos++
				continue
			case '{', '[':
				d.val, d.sc = d.pos, valueScanner{spans: true}
			default:
				d.passing = true // no value: go-sdk reads it as it did
				return false
			}
		}
		end, _ := d.sc.scan(d.buf[d.pos:d.n])
		if end < 0 {
			d.pos = d.n
			return false
		}
		end += d.pos
		d.out = d.buf[d.start:end]
		if d.sc.max > sdkMaxDepth {
			if stand := d.hold(d.buf[d.val:end]); stand != nil {
				d.out = append(bytes.Clone(d.buf[d.start:d.val]), stand...)
			}
		}
		d.start, d.pos, d.val = end, end, -1
		return true
	}
	return false
}

// hold keeps v, a value nested deeper than go-sdk reads, from go-sdk if
// it is an answer, and returns what go-sdk gets in its place: an error
// answer to its id. It returns nil for anything else, which goes on as it
// came.
func (d *deepReader) hold(v []byte) []byte {
	stand, h, id, ok := heldDeep(v)
	if !ok {
		return nil
	}
	d.mu.Lock()
	d.held[id] = h
	d.mu.Unlock()
	return stand
}

// heldDeep reads v, a value nested deeper than go-sdk reads, if it is
// an answer (a message with an id and no method): it returns what go-sdk
// gets in its place, an error answer to its id (deepStandIn), and the
// answer as parseWire reads it, or why it cannot. ok is false for
// anything else.
func heldDeep(v []byte) (stand []byte, h heldAnswer, id jsonrpc.ID, ok bool) {
	rawID, found := topMember(v, "id")
	if !found || v[0] != '{' || namesMethod(v) {
		return nil, h, id, false
	}
	stand = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, rawID, jsonrpc.CodeInternalError, deepStandIn)
	m, err := jsonrpc.DecodeMessage(stand)
	r, _ := m.(*jsonrpc.Response)
	if err != nil || r == nil || !r.ID.IsValid() {
		return nil, h, id, false
	}
	switch w, err := parseWire(v); {
	case err != nil:
		h.err = err
	case w.Error != nil:
		h.msg = &jsonrpc.Response{ID: r.ID, Error: &jsonrpc.Error{Code: w.Error.Code, Message: w.Error.Message, Data: w.Error.Data}}
	default:
		h.msg = &jsonrpc.Response{ID: r.ID, Result: w.Result}
	}
	return stand, h, r.ID, true
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

// take returns the answer held for id, if any, and forgets it.
func (d *deepReader) take(id jsonrpc.ID) (heldAnswer, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.held[id]
	delete(d.held, id)
	return h, ok
}

// commandTransport starts a stdio server's process and connects to it as
// go-sdk's CommandTransport does, reading its stdout through a
// deepReader.
type commandTransport struct {
	cmd  *exec.Cmd
	deep *deepReader // its stdout's, once connected
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
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	t.deep = newDeepReader(stdout)
	// The connection is closed by closing stdin, not stdout.
	return (&mcp.IOTransport{Reader: io.NopCloser(t.deep), Writer: processStdin{stdin, t.cmd}}).Connect(ctx)
}

// processStdin is a stdio server's stdin, whose Close ends the server as
// go-sdk's CommandTransport does (MCP, Transports, stdio, Shutdown):
// stdin closed, then SIGTERM if it has not exited within
// terminateTimeout, then SIGKILL.
type processStdin struct {
	io.WriteCloser
	cmd *exec.Cmd
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

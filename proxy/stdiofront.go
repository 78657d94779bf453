package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The pipe front's own tools/calls.
//
// Through the SDK's server a tools/call on stdio costs what it costs on
// HTTP (httpfront.go): the message decoded into Go types several times,
// each time with a new 32 KiB buffer, and the result decoded and encoded
// again, so that the client got the SDK's re-encoding of the server's
// result rather than its bytes. So the pipe front reads the client's
// stream through a frameReader (jsonframe.go) and serves a plain
// tools/call itself: one JSON-RPC request on a line of its own, on a
// session initialized at a revision the fast path speaks or, without
// one, of the sessionless 2026-07-28 revision (pipeRevision), with params
// the HTTP front's fast path takes (parseFast, fastCallOf). It goes
// through the one call lifecycle (serveCall), and its answer is the
// result as the server sent it, with the receipt, on one line. A
// notifications/cancelled for such a call cancels it. Everything else
// (initialize, lists, the proxy's own and the task tools, calls with a
// progress token, batches, the client's answers to the server's requests)
// reaches the SDK's connection byte for byte, as before; a line that is
// not a JSON-RPC message is answered with an error instead (refuse),
// where the SDK ended the session. Requests the server sends the client
// during such a call go through the SDK's session, on the same pipe
// (askClient).

// A pipeFront is one pipe front session's reading and writing.
type pipeFront struct {
	p   *Proxy
	w   *lineWriter
	ss  atomic.Pointer[mcp.ServerSession] // set once connected
	ids frontIDs                          // the ids of its requests in progress, either path's
	// revision is the session's, once initialize was answered (idConn).
	revision atomic.Pointer[string]
	// initWait is open from when the front passes the SDK an initialize
	// request until it is answered: a batch read meanwhile waits for the
	// session's revision (awaitRevision).
	initMu   sync.Mutex
	initWait chan struct{}

	ctx    context.Context // done when the session ends: its calls are cancelled
	cancel context.CancelFunc
}

// A lineWriter writes whole messages to the client, one at a time and in
// the order given: the SDK's connection writes each message with one
// Write, and so does the pipe front.
//
// A stdio server's progress and log notifications are written from that
// server's read loop (inOrder), so a client that stops reading its stdout
// would hold up that server's answers to every client, the HTTP front's
// too; and the SDK's connection writes one message at a time, so any of
// its writes waiting for the client holds up the rest. So what the SDK
// writes is queued, never waited for, and written by a goroutine of the
// lineWriter's own. Progress and log notifications are dropped by the
// streamWriter's policy (dropGate) when the client is far behind, and both kinds are advice: the
// calls' results lose nothing. Ending the session instead would cut off
// the client's calls under way for a pause in its reading. What else the
// SDK writes is queued whatever the queue holds: answers and the server's
// requests are held by their calls until then anyway, and other
// notifications (a list changed, a resource updated) are few, and lost
// would leave the client with stale lists. The pipe front's own answers
// (writeOwned) are written by their calls' goroutines, which may wait for
// their client: at once when nothing is queued or being written, else
// queued behind what is.
type lineWriter struct {
	w      io.WriteCloser
	logger *slog.Logger

	mu      sync.Mutex
	cond    sync.Cond // the queue or writing changed, or closing was set
	queue   [][]byte
	queued  int   // bytes in queue
	writing bool  // a write to w is under way
	closing bool  // the session ended: once the queue is written, w is closed
	done    bool  // the queue's goroutine has returned: writes go to w at once
	err     error // the first failed write's, which every later write returns
	drops   dropGate
	failed  sync.Once // the first failed write is logged
	// unpaced is set once the client's stdin is closed: a read waits for
	// room no longer.
	unpaced bool
	paused  bool // a read waits for room: the pause is logged once
}

// maxPipeQueue is how many bytes a lineWriter holds queued before it drops
// progress and log notifications.
const maxPipeQueue = 1 << 20

// maxPipeBehind is how many bytes a lineWriter holds queued before the
// pipe front stops reading its client's requests (pacedReader). Answers
// are queued whatever the queue holds, so a client sending requests
// without reading the answers grew the sidecar's memory without bound.
const maxPipeBehind = 2 * maxPipeQueue

func newLineWriter(w io.WriteCloser, logger *slog.Logger) *lineWriter {
	l := &lineWriter{w: w, logger: logger, drops: dropGate{
		stalled: "proxy: the stdio client is not reading its stdout; its progress and log notifications are dropped until it does",
		reading: "proxy: the stdio client reads its stdout again",
		ended:   "proxy: the stdio session ended with notifications dropped",
	}}
	l.cond.L = &l.mu
	go l.run()
	return l
}

// Write queues a copy of b, or drops it (see lineWriter); it does not
// wait for the client.
func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return 0, l.err
	case l.done:
		return len(b), l.writeNow(b)
	case l.drops.drop(l.logger, len(l.queue) > 0, l.queued, len(b), droppable(b)):
		return len(b), nil
	}
	l.enqueue(bytes.Clone(b))
	return len(b), nil
}

// writeOwned writes b, which its caller no longer uses, at once if
// nothing is queued or being written, else queues it.
func (l *lineWriter) writeOwned(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return l.err
	case l.done || !l.writing && len(l.queue) == 0:
		return l.writeNow(b)
	}
	l.enqueue(b)
	return nil
}

func (l *lineWriter) enqueue(b []byte) {
	l.queue = append(l.queue, b)
	l.queued += len(b)
	l.cond.Broadcast()
}

// writeNow writes b to w, after a write under way; l.mu is held, but not
// while writing.
func (l *lineWriter) writeNow(b []byte) error {
	for l.writing {
		l.cond.Wait()
	}
	if l.err != nil {
		return l.err
	}
	l.writing = true
	l.mu.Unlock()
	_, err := l.w.Write(b)
	if err != nil {
		l.failed.Do(func() {
			l.logger.Warn("proxy: writing to the stdio client failed; its answers are lost from here on, its calls still recorded", "error", err)
		})
	}
	l.mu.Lock()
	l.writing = false
	if err != nil && l.err == nil {
		l.err = err
	}
	l.cond.Broadcast()
	return err
}

// droppable reports whether b, a message to the client, is a progress
// or log notification, as the SDK encodes one.
func droppable(b []byte) bool {
	m, ok := bytes.CutPrefix(b, []byte(`{"jsonrpc":"2.0","method":"notifications/`))
	return ok && (bytes.HasPrefix(m, []byte(`progress"`)) || bytes.HasPrefix(m, []byte(`message"`)))
}

// run writes the queue until the session ended and all of it is written,
// or a write failed; then it closes w.
func (l *lineWriter) run() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.err == nil && (len(l.queue) > 0 || !l.closing || l.writing) {
		if l.writing || len(l.queue) == 0 {
			l.cond.Wait()
			continue
		}
		b := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.queued -= len(b)
		l.writeNow(b)
	}
	l.queue, l.queued, l.done = nil, 0, true
	l.drops.finish(l.logger)
	l.cond.Broadcast()
	l.w.Close()
}

// Close ends the session's writing: w is closed once the queue is
// written (at once if nothing is queued). Writes after it go to w as they
// come.
func (l *lineWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing = true
	l.cond.Broadcast()
	return nil
}

// waitRoom waits, for a read of the client's requests, until the client
// has read enough of what is queued for it, its stdout failed, or the
// session ended.
func (l *lineWriter) waitRoom() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.queued > maxPipeBehind && l.err == nil && !l.closing && !l.unpaced {
		if !l.paused {
			l.paused = true
			l.logger.Warn("proxy: the stdio client is not reading its stdout; reading its requests paused until it does", "queued_bytes", l.queued)
		}
		l.cond.Wait()
	}
	if l.paused {
		l.paused = false
		l.logger.Info("proxy: the stdio client reads its stdout again; reading its requests goes on")
	}
}

// A pacedReader reads the client's requests only while the client reads
// the answers (lineWriter.waitRoom): as a network connection's flow
// control would, its writes wait while the sidecar's queue is full.
type pacedReader struct {
	io.ReadCloser
	w *lineWriter
}

func (r *pacedReader) Read(b []byte) (int, error) {
	r.w.waitRoom()
	return r.ReadCloser.Read(b)
}

// Close ends a wait for room too: the session is closing.
func (r *pacedReader) Close() error {
	r.w.mu.Lock()
	r.w.unpaced = true
	r.w.cond.Broadcast()
	r.w.mu.Unlock()
	return r.ReadCloser.Close()
}

// frontPipe is the front transport over r and w, and the front that
// reads through it: the SDK's connection (idTransport's) reads what the
// front did not take.
func (p *Proxy) frontPipe(r io.ReadCloser, w io.WriteCloser) (mcp.Transport, *pipeFront) {
	f := &pipeFront{p: p, w: newLineWriter(w, p.logger)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	fr := newFrameReader(&pacedReader{ReadCloser: r, w: f.w}, f.take, f.refuse)
	fr.tooLong = f.refuseLong
	return &idTransport{r: fr, w: f.w, f: f, trace: p.opts.Tracer != nil}, f
}

// connectPipe serves one client over r and w; the session ends when the
// client disconnects (or is closed).
func (p *Proxy) connectPipe(ctx context.Context, r io.ReadCloser, w io.WriteCloser) (*mcp.ServerSession, error) {
	t, f := p.frontPipe(r, w)
	ss, err := p.server.Connect(ctx, t, nil)
	if err != nil {
		f.cancel()
		f.w.Close() // its goroutine returns
		return nil, err
	}
	f.ss.Store(ss)
	go func() {
		ss.Wait()
		f.cancel()
	}()
	return ss, nil
}

// take serves v itself if it is a call the pipe front takes, or a
// cancellation of one; it reports whether it did.
func (f *pipeFront) take(v []byte) bool {
	ss := f.ss.Load()
	if ss == nil || f.p.noFastPath ||
		!bytes.Contains(v, []byte(`"tools/call"`)) && !bytes.Contains(v, []byte(`"notifications/cancelled"`)) {
		return false // not worth parsing
	}
	fr, ok := parseFast(bytes.Clone(v)) // v is the reader's buffer
	if !ok || unsafeID(fr.id) {
		return false // refuse answers a message with such an id
	}
	switch {
	case fr.method == "notifications/cancelled" && fr.id == nil:
		return f.ids.cancel(callKey(fr.requestID))
	case fr.method == "tools/call" && fr.id != nil:
		fc, ok := f.p.fastCallOf(fr, true)
		if !ok {
			return false
		}
		protocol, client, ok := pipeRevision(ss, fc)
		if !ok {
			return false
		}
		key := callKey(fr.id)
		ctx, cancel := context.WithCancel(f.ctx)
		if !f.ids.claim(key, cancel) {
			cancel()
			f.refuseDuplicate(fr.id)
			return true
		}
		f.p.pipeCalls.Add(1)
		go f.serve(ctx, cancel, key, ss, protocol, client, fr.id, fc)
		return true
	}
	return false
}

// refuse answers msg, the rest of a line from the client or a value on
// one, if it is no JSON-RPC message the SDK can read, and reports whether
// it did: with -32700 (Parse error) if it is not JSON, -32600 (Invalid
// Request) if it is JSON but no message, naming what is wrong and
// quoting the start of msg. The SDK ended the session on either, cutting
// off its calls under way. The answer's id is msg's if it has one the
// SDK keeps, else null (JSON-RPC 2.0, section 5). Nothing is recorded:
// no call was made. The sidecar's log says what was wrong, but not what
// the client sent, which may hold its secrets.
//
// A message (or batch) with an id the SDK would change (badRequestID) is
// refused too, as the HTTP front refuses it, whatever it asks and
// wherever it stands on its line: the SDK answered it under another id.
func (f *pipeFront) refuse(msg []byte) bool {
	rev := f.sessionRevision()
	if rev == "" && msg[0] == '[' {
		rev = f.awaitRevision()
	}
	b := Refusal(msg, rev, f.p.logger)
	if b == nil {
		if rev == "" && msg[0] == '{' && bytes.Contains(msg, []byte(`"initialize"`)) {
			f.noteInitialize(msg)
		}
		return false
	}
	f.w.writeOwned(b)
	return true
}

// noteInitialize notes msg, a message the front passes the SDK before
// the session's revision is known, if it is an initialize request: until
// its answer goes out, a batch waits for the revision it gives. A batch
// read before the answer was judged without it and passed to the SDK,
// which served it, or ended the session if it had taken the revision
// from initialize by then (TestServeStdioBatchBeforeInitAnswer).
func (f *pipeFront) noteInitialize(msg []byte) {
	m, err := jsonrpc.DecodeMessage(msg)
	if r, ok := m.(*jsonrpc.Request); err != nil || !ok || !r.IsCall() || r.Method != "initialize" {
		return
	}
	f.initMu.Lock()
	defer f.initMu.Unlock()
	if f.initWait == nil {
		f.initWait = make(chan struct{})
	}
}

// initAnswered ends a wait for initialize's answer (noteInitialize).
func (f *pipeFront) initAnswered() {
	f.initMu.Lock()
	defer f.initMu.Unlock()
	if f.initWait != nil {
		close(f.initWait)
		f.initWait = nil
	}
}

// awaitRevision waits until an initialize request passed to the SDK is
// answered, if one is waiting, or the session ends, and returns the
// session's revision.
func (f *pipeFront) awaitRevision() string {
	f.initMu.Lock()
	w := f.initWait
	f.initMu.Unlock()
	if w != nil {
		select {
		case <-w:
		case <-f.ctx.Done():
		}
	}
	return f.sessionRevision()
}

// Refusal is refuse's answer to msg, on a line, from a client on a
// session of revision rev ("" until initialize is answered), or nil if
// msg is a JSON-RPC message it reads. A stdio serve that joined a running
// sidecar answers its client's lines with it too, as this front would.
func Refusal(msg []byte, rev string, logger *slog.Logger) []byte {
	if id, bad := badRequestID(msg); bad {
		b := appendResponse(nil, json.RawMessage("null"), nil, refusedIDMessage(id))
		return append(b, '\n')
	}
	code, why := messageFault(msg)
	if why == "" && msg[0] == '[' && rev >= batchingRefusedFrom {
		code, why = jsonrpc.CodeInvalidRequest, batchRefused(rev)
	}
	if why == "" {
		return nil
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	id := json.RawMessage("null")
	if msg[0] == '{' && json.Unmarshal(msg, &m) == nil && len(m.ID) > 0 && (m.ID[0] == '"' || safeID(m.ID)) {
		id = m.ID
	}
	logger.Warn("proxy: the stdio client sent a line that is not a JSON-RPC message; answered it with an error, and its session goes on", "code", code, "error", why, "bytes", len(msg))
	e := rpcError(code, "provlog: %s: %q; send one JSON-RPC message per line", why, truncate(string(msg), 64))
	return append(appendResponse(nil, id, nil, e), '\n')
}

// refuseLong answers a line of n bytes, longer than a message may be,
// which was dropped unread (LongLineRefusal).
func (f *pipeFront) refuseLong(n int) {
	f.w.writeOwned(LongLineRefusal(n, f.p.logger))
}

// MaxLineBytes is the longest line a stdio client may send: the longest
// message the SDK reads.
const MaxLineBytes = maxFrameBytes

// LongLineRefusal is the answer, on a line, to a line of n bytes, longer
// than MaxLineBytes, which was dropped unread: -32600 (Invalid Request)
// and id null, as its id was not read. Nothing is recorded: no call was
// made. A stdio serve that joined a running sidecar answers so too.
func LongLineRefusal(n int, logger *slog.Logger) []byte {
	logger.Warn("proxy: the stdio client sent a line longer than a JSON-RPC message may be; dropped it, answered it with an error, and its session goes on", "bytes", n, "limit", MaxLineBytes)
	e := rpcError(jsonrpc.CodeInvalidRequest, "provlog: the line is longer than %d MiB (%d bytes), the most one message may be; it was dropped unread; send one JSON-RPC message per line", MaxLineBytes>>20, n)
	return append(appendResponse(nil, json.RawMessage("null"), nil, e), '\n')
}

// MaxBatchMessages is the most messages a client's batch may hold, on
// stdio or HTTP (on a revision before 2025-06-18, which has batches;
// batchFault). The SDK serves a
// batch's requests all at once and answers them in one message: a batch
// of 350,000 pings, under the 16 MiB line limit, took the sidecar's RSS
// from 35 MB to 485 MB and 20 s of CPU; on HTTP, 90,000 pings under the
// 4 MiB body bound took it from 35 MB to 159 MB and 5 s of CPU.
const MaxBatchMessages = 1024

// batchFault says why a batch of n messages is not served, or "" if it
// may be: both fronts refuse a batch over MaxBatchMessages with it.
func batchFault(n int) string {
	if n > MaxBatchMessages {
		return fmt.Sprintf("the batch holds %d messages, more than the %d one may hold; none was served", n, MaxBatchMessages)
	}
	return ""
}

// messageFault says what makes msg no JSON-RPC message the SDK reads: its
// code (-32700 or -32600) and the reason, or "" if it is one. The SDK's
// own decoder judges each message.
func messageFault(msg []byte) (int64, string) {
	var batch []json.RawMessage
	if msg[0] == '[' && json.Unmarshal(msg, &batch) == nil {
		if len(batch) == 0 {
			return jsonrpc.CodeInvalidRequest, "the line is an empty batch, which is not a JSON-RPC message"
		}
		if why := batchFault(len(batch)); why != "" {
			return jsonrpc.CodeInvalidRequest, why
		}
		for i, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return jsonrpc.CodeInvalidRequest, fmt.Sprintf("message %d of the batch is not a JSON-RPC message (%v)", i+1, err)
			}
		}
		return 0, ""
	}
	if msg[0] == '{' {
		// The SDK's decoder takes a message with more after it, which a
		// joined serve's line may hold (Refusal).
		if _, err := jsonrpc.DecodeMessage(msg); err == nil && json.Valid(msg) {
			return 0, ""
		} else if json.Valid(msg) {
			return jsonrpc.CodeInvalidRequest, fmt.Sprintf("the line is not a JSON-RPC message (%v)", err)
		}
	}
	if err := json.Unmarshal(msg, new(json.RawMessage)); err != nil {
		var syntax *json.SyntaxError
		switch {
		case !errors.As(err, &syntax):
			return jsonrpc.CodeParseError, fmt.Sprintf("the line is not JSON (%v)", err)
		case err.Error() == "unexpected end of JSON input":
			return jsonrpc.CodeParseError, "the line ends inside a JSON value (a message cut short, or spread over lines)"
		}
		return jsonrpc.CodeParseError, fmt.Sprintf("the line is not JSON (%v, at byte %d)", err, syntax.Offset)
	}
	return jsonrpc.CodeInvalidRequest, "the line is JSON but not a JSON-RPC message, which is an object (or an array of them)"
}

// pipeRevision returns the revision and client of call fc on ss, if the
// pipe front takes it: a call on a session initialized at a revision the
// fast path speaks, to a server with sessions; or, on a session not
// initialized at an older revision (a 2026-07-28 client sends
// server/discover, not initialize), a call of the sessionless revision
// whose _meta holds what the SDK requires of one (sessionlessClient).
func pipeRevision(ss *mcp.ServerSession, fc fastCall) (string, *mcp.Implementation, bool) {
	_, perRequest := fc.meta[mcp.MetaKeyProtocolVersion]
	if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion < statelessProtocol {
		if perRequest || !slices.Contains(fastProtocols, ip.ProtocolVersion) || fc.d.stateless() {
			return "", nil, false
		}
		return ip.ProtocolVersion, ip.ClientInfo, true
	}
	client, ok := sessionlessClient(fc.meta)
	return statelessProtocol, client, ok
}

// serve makes one call and answers it on a line of its own.
func (f *pipeFront) serve(ctx context.Context, cancel context.CancelFunc, key string, ss *mcp.ServerSession, protocol string, client *mcp.Implementation, id json.RawMessage, fc fastCall) {
	growStack(0)
	start := time.Now()
	defer cancel()
	var res json.RawMessage
	var rerr *jsonrpc.Error
	defer func() {
		// The id is free again before its answer goes out: the client
		// may use it again as soon as it has the answer.
		f.ids.free(key)
		b := appendResponse(make([]byte, 0, len(res)+96), id, res, rerr)
		f.w.writeOwned(append(b, '\n'))
	}()
	in := &callIn{
		d: fc.d, tool: fc.tool, argsCanon: fc.argsCanon,
		params:  &mcp.CallToolParamsRaw{Name: fc.front, Arguments: fc.args, Meta: fc.meta},
		session: ss, client: client, protocol: protocol, id: id, transport: "pipe", start: start,
	}
	if res, rerr = f.p.serveGuarded(ctx, in); rerr == nil && protocol == statelessProtocol {
		res = withResultType(res)
	}
}

// refuseDuplicate refuses a request under id, the id of a request in
// progress (frontids.go), as the SDK refuses one on a pipe: under id
// null, so that the client takes it for no answer to that request.
func (f *pipeFront) refuseDuplicate(id json.RawMessage) {
	f.w.writeOwned(append(appendResponse(nil, json.RawMessage("null"), nil, duplicateID(id)), '\n'))
}

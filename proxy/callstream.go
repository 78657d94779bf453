package proxy

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A fast-path call's own answer, one per call.
//
// To a client of revision 2025-11-25 or later the answer is an event
// stream that can be resumed (the streamable HTTP transport's
// resumability and SSE polling, SEP-1699): it opens with a priming event
// (an event id, a retry field, no data) sent at once, and every event after
// it has an id too — a request the server makes to the client during the
// call (sampling, elicitation), and last the call's response. A client
// whose connection drops, or whose stream the proxy closes because the
// downstream server closed its own (httpcall.go), GETs the endpoint with
// Last-Event-ID and gets the events after that one, then the rest as they
// come. The call itself does not depend on the connection: it goes on
// until it is answered, cancelled (notifications/cancelled) or its session
// ends, and its response is an event only once serveCall returned it,
// that is once its call.result entry is durable. Resuming a stream replays
// what was sent, never the call: a call is recorded once, and a resumed
// stream carries only a recorded outcome.
//
// To older clients the answer is one JSON response, or an event stream
// without ids if the server asks the client something; the call is
// cancelled when its connection drops, as nothing could get its answer.
//
// The client POSTs its response to a request as a JSON-RPC response on
// its session, which the fast front hands to the waiting call (fastPOST).
//
// # What is kept, and for how long
//
// A stream's events are kept while its call is in progress, and after it
// for a resume. A response written to a live connection is delivered, as
// far as the proxy can tell; but the connection may have been closing as
// it was written, the bytes gone into the kernel's socket buffer and never
// to the client, which then resumes with Last-Event-ID. So a delivered
// stream stays resumable for [deliveredKeep] after it was written (a
// resume writes it anew, and it stays so long again); the response of a
// call whose client is not connected when it comes is kept until a resume
// delivers it. A resume replays the same events either way, from memory:
// the call is never made or recorded again.
//
// Finished streams are kept within one budget for the whole proxy,
// [keptStreamBytes]: beyond it the delivered streams are dropped first,
// then the undelivered ones, as an undelivered response is one a client
// certainly still needs; of either, the oldest of the actor whose streams
// take the most of it, so that one actor's streams push out its own
// before another's (its answers left unread cannot push out another
// actor's, who would find hers not kept). The
// delivered ones also have a smaller budget of their own,
// [deliveredStreamBytes]: under load every call's stream is delivered
// and kept, and the whole budget of them would cost the sidecar some
// 17 MiB of RSS at 32 clients (session 10: 73.8 against 56.5 MiB). A
// session's streams go when it ends, which [Options.SessionIdle] without a
// request does: its idle clock restarts with the request that delivered a
// response, so with a SessionIdle shorter than deliveredKeep a delivered
// stream may go sooner, with its session. A resume of a
// stream not kept is refused (400), as the SDK's handler refuses a stream
// it cannot replay.

// keptStreamBytes bounds the memory of finished call streams kept for a
// client to resume, over all sessions: their events' bytes and
// keptStreamOverhead each.
const keptStreamBytes = 8 << 20

// keptStreamOverhead is what a kept stream costs besides its events'
// bytes: the stream, its channel, its list element, its entry in the
// session's map and its events' slack (measured: about 520 bytes). Now
// that every resumable call's stream is kept a while, a budget of event
// bytes alone would let small responses take several times it.
const keptStreamOverhead = 512

// deliveredStreamBytes bounds the delivered streams among the kept ones,
// oldest dropped first. It holds the last second or two of responses at a
// few hundred calls a second (about 2 KiB a 1 KiB echo's stream), which
// covers a client that reconnects after the priming event's retry
// ([primeRetry]); at lower rates deliveredKeep is what ends them.
const deliveredStreamBytes = keptStreamBytes / 4

// deliveredKeep is how long a delivered stream stays resumable: a client
// whose connection broke as the response was written reconnects after the
// priming event's retry ([primeRetry]) and its own backoff, within a few
// attempts.
const deliveredKeep = 30 * time.Second

// primeRetry is the reconnection time a resumable stream gives the client
// in its priming event.
const primeRetry = time.Second

// primeDelay is how long a resumable stream's priming event waits to go
// out with the call's response. A call answered within it (most are, even
// at 32 clients) gets one write to the client rather than two, and the
// client one read: flushing the priming event at once cost both sides a
// system call and a wake-up per call. A call that takes longer has its
// priming event flushed then, so the client can resume it. What it gives
// up is resuming a call whose connection drops within primeDelay of the
// call's start: the client has no event id yet (as it had none before
// the priming event reached it), and the call, recorded either way, is
// answered to nobody.
const primeDelay = 50 * time.Millisecond

// callStreamKey holds a fast call's *callStream in the call's context.
type callStreamKey struct{}

// A callStream is the answer to one fast-path call.
type callStream struct {
	fs      *frontSession
	id      string        // the stream's id in its session; "" if it cannot be resumed
	timeout time.Duration // a write that takes this long gives the client up (writeTimed)
	logger  *slog.Logger

	mu      sync.Mutex
	w       http.ResponseWriter // the connection it is written to; nil if none
	release chan struct{}       // closed when w is let go
	sse     bool                // the answer is an event stream
	primer  *time.Timer         // flushes the priming event, unless the response went first
	done    bool                // the response is written or kept
	events  [][]byte            // a resumable stream's events after priming: events[i] has index i+1
	size    int                 // its events' bytes

	// Its place among the kept streams (p.kept.mu).
	kept    *list.Element // nil if it is not kept
	at      time.Time     // when a delivered stream was delivered; zero while undelivered
	dropped bool          // it is no longer kept, and cannot be resumed
}

// newCallStream returns the answer to a call on fs, written to w. A
// resumable one is an event stream that opens with a priming event,
// flushed with the response or after primeDelay, whichever is first.
func (p *Proxy) newCallStream(fs *frontSession, w http.ResponseWriter) *callStream {
	s := &callStream{fs: fs, w: w, release: make(chan struct{}), timeout: p.answerTimeout(), logger: p.logger}
	if !fs.resumable() {
		return s
	}
	s.id = "provlog" + strconv.FormatUint(p.nextToken.Add(1), 10)
	fs.streams.Store(s.id, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startSSE()
	if s.put(primeEvent(s.id), false) {
		s.primer = time.AfterFunc(primeDelay, s.flushPrime)
	}
	return s
}

// primeEvent is the priming event of the stream id, built in one buffer
// (a string concatenation, its copy as bytes and the retry's digits were
// three allocations a call).
func primeEvent(id string) []byte {
	b := append(make([]byte, 0, 48+len(id)), "event: prime\nid: "...)
	b = append(append(b, id...), "_0\nretry: "...)
	b = strconv.AppendInt(b, primeRetry.Milliseconds(), 10)
	return append(b, "\ndata: \n\n"...)
}

// resumable reports whether fs's calls are answered on streams a client
// can resume (2025-11-25 on), which open with a priming event.
func (fs *frontSession) resumable() bool { return fs.protocol >= "2025-11-25" }

// flushPrime flushes the priming event of a stream not yet answered.
func (s *callStream) flushPrime() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done && s.w != nil {
		if http.NewResponseController(s.w).Flush() != nil {
			s.letGo()
		}
	}
}

// startSSE turns the answer into an event stream, if it is not one yet.
func (s *callStream) startSSE() {
	if s.sse {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.sse = true
}

// send writes an event to the live connection and reports whether it got
// there; a connection that fails is let go.
func (s *callStream) send(ev []byte) bool {
	return s.put(ev, true)
}

// put writes ev to the live connection, flushed if flush; it reports
// false, and lets the connection go, if there is none or the write fails.
// The stream's last event is not flushed: its handler returns right after
// and net/http flushes it with the stream's end, in one write.
func (s *callStream) put(ev []byte, flush bool) bool {
	if s.w == nil {
		return false
	}
	rc := http.NewResponseController(s.w)
	err := writeTimed(rc, s.w, ev, s.timeout)
	if err == nil && flush {
		err = rc.Flush()
	}
	if err != nil {
		s.gaveUp(err)
		s.letGo()
		return false
	}
	return true
}

// gaveUp says so when a write to the client failed because it took
// nothing for s.timeout: its connection is closed, and a resumable
// answer is kept for a resume.
func (s *callStream) gaveUp(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.logger.Warn("proxy: an HTTP client took nothing of its call's answer; its connection is closed (a resumable answer is kept for a resume)", "waited", s.timeout, "stream", s.id)
	}
}

// letGo releases the live connection's handler; nothing is written to it
// after.
func (s *callStream) letGo() {
	if s.w != nil {
		s.w = nil
		close(s.release)
	}
}

// event returns msg as the stream's next event: with an id if the stream
// can be resumed, where it is also kept.
func (s *callStream) event(msg []byte) []byte {
	return s.endEvent(append(s.startEvent(len(msg)), msg...))
}

// responseEvent is event of the JSON-RPC response to id, written in place.
func (s *callStream) responseEvent(id, result json.RawMessage, rpcErr *jsonrpc.Error) []byte {
	return s.endEvent(appendResponse(s.startEvent(len(id)+len(result)+64), id, result, rpcErr))
}

// startEvent returns a new event's lines up to its data, with room for n
// bytes of data.
func (s *callStream) startEvent(n int) []byte {
	b := make([]byte, 0, n+len(s.id)+48)
	if s.id != "" {
		b = append(b, "id: "...)
		b = append(b, s.id...)
		b = append(b, '_')
		b = strconv.AppendInt(b, int64(len(s.events)+1), 10)
		b = append(b, '\n')
	}
	return append(b, "event: message\ndata: "...)
}

// endEvent ends the event b, keeping it if the stream can be resumed.
func (s *callStream) endEvent(b []byte) []byte {
	b = append(b, "\n\n"...)
	if s.id != "" {
		s.events = append(s.events, b)
		s.size += len(b)
	}
	return b
}

// write sends a request or notification to the client on the stream.
func (s *callStream) write(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errors.New("provlog: the call's stream is closed")
	}
	if s.w != nil {
		s.startSSE()
	}
	if !s.send(s.event(msg)) && s.id == "" {
		return errors.New("provlog: the client's connection is gone")
	}
	return nil
}

// answer writes the call's response: as one JSON response, or as the last
// event of the stream. A resumable stream is kept for a resume, delivered
// or not.
func (p *Proxy) answer(s *callStream, id, result json.RawMessage, rpcErr *jsonrpc.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	if s.primer != nil {
		s.primer.Stop()
	}
	if !s.sse && s.w != nil {
		if err := writeRPCStatus(s.w, http.StatusOK, id, result, rpcErr, s.timeout); err != nil {
			s.gaveUp(err)
		}
		s.letGo()
		return
	}
	delivered := s.put(s.responseEvent(id, result, rpcErr), false)
	s.letGo()
	p.keep(s, delivered)
}

// pause ends the live connection of a resumable stream while its call
// goes on, telling the client to come back after retry (SSE polling: the
// downstream server closed its own stream of the call so).
func (s *callStream) pause(retry time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == "" || s.done || s.w == nil {
		return
	}
	s.send([]byte("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n\n"))
	s.letGo()
}

// wait holds the handler of the connection the stream is written to until
// the stream lets it go or the connection ends; nothing is written to it
// after wait returns.
func (s *callStream) wait(ctx context.Context, release chan struct{}) {
	select {
	case <-release:
	case <-ctx.Done():
		s.mu.Lock()
		if s.release == release {
			s.letGo()
		}
		s.mu.Unlock()
	}
}

// resume serves a GET with Last-Event-ID on fs: the events of the named
// stream after that one, then those still to come. It reports false if
// lastID is not a stream of the fast path's (the SDK's handler judges
// it).
func (p *Proxy) resume(w http.ResponseWriter, r *http.Request, fs *frontSession, lastID string) bool {
	sid, n, ok := strings.Cut(lastID, "_")
	idx, err := strconv.Atoi(n)
	if !ok || !strings.HasPrefix(sid, "provlog") || err != nil || idx < 0 {
		return false
	}
	v, ok := fs.streams.Load(sid)
	var s *callStream
	if ok {
		s = v.(*callStream)
		s.mu.Lock()
		p.kept.mu.Lock()
		ok = !s.dropped // else it goes from the session as soon as it can
		p.kept.mu.Unlock()
		if !ok {
			s.mu.Unlock()
		}
	}
	if !ok {
		http.Error(w, "provlog: stream "+sid+" is not kept (it was dropped to keep the proxy's memory bounded, its response was delivered more than "+deliveredKeep.String()+" ago, or it never was); it cannot be resumed", http.StatusBadRequest)
		return true
	}
	if idx > len(s.events) {
		s.mu.Unlock()
		http.Error(w, "provlog: stream "+sid+" has no event "+n, http.StatusBadRequest)
		return true
	}
	s.letGo() // a client resuming has given up the connection before
	s.w, s.release, s.sse = w, make(chan struct{}), false
	s.startSSE()
	if idx == len(s.events) {
		http.NewResponseController(w).Flush() // the headers, while the client waits
	}
	for _, ev := range s.events[idx:] {
		if !s.send(ev) {
			break
		}
	}
	if s.done && s.w != nil {
		s.letGo()
		p.keep(s, true)
	}
	release := s.release
	s.mu.Unlock()
	s.wait(r.Context(), release)
	return true
}

// keptStreams are the finished streams kept for a resume, each list
// oldest first, and their bytes.
type keptStreams struct {
	mu        sync.Mutex
	waiting   list.List         // those whose response no client has read yet
	delivered list.List         // those delivered, by their at
	bytes     int               // both lists' events and overhead
	dbytes    int               // the delivered list's
	byActor   map[string][2]int // each actor's share of the waiting [0] and delivered [1] lists' bytes
	timer     *time.Timer       // drops the delivered streams as their time is up; nil until one is kept

	testingOnlyDeliveredKeep time.Duration // deliveredKeep if zero
}

// deliveredKeep returns how long a delivered stream is kept (k.mu held).
func (k *keptStreams) deliveredKeep() time.Duration {
	if k.testingOnlyDeliveredKeep != 0 {
		return k.testingOnlyDeliveredKeep
	}
	return deliveredKeep
}

// list returns the list s belongs in.
func (k *keptStreams) list(s *callStream) *list.List {
	if s.at.IsZero() {
		return &k.waiting
	}
	return &k.delivered
}

// remove takes s out of the kept streams (k.mu held), for good if drop.
func (k *keptStreams) remove(s *callStream, drop bool) {
	if s.kept != nil {
		k.list(s).Remove(s.kept)
		k.bytes -= s.size + keptStreamOverhead
		if !s.at.IsZero() {
			k.dbytes -= s.size + keptStreamOverhead
		}
		k.account(s, -1)
		s.kept = nil
	}
	s.dropped = s.dropped || drop
}

// account adds s's bytes (sign 1) to its actor's share of its list, or
// takes them away (-1).
func (k *keptStreams) account(s *callStream, sign int) {
	which := 0
	if !s.at.IsZero() {
		which = 1
	}
	a := s.fs.actor
	n := k.byActor[a]
	n[which] += sign * (s.size + keptStreamOverhead)
	switch {
	case n == [2]int{}:
		delete(k.byActor, a)
	case k.byActor == nil:
		k.byActor = map[string][2]int{a: n}
	default:
		k.byActor[a] = n
	}
}

// victim returns the stream of list l (which: 0 waiting, 1 delivered) to
// drop: the oldest of the actor whose streams take the most of it.
func (k *keptStreams) victim(l *list.List, which int) *callStream {
	heaviest, most := "", -1
	for a, n := range k.byActor {
		if n[which] > most {
			heaviest, most = a, n[which]
		}
	}
	for e := l.Front(); e != nil; e = e.Next() {
		if s := e.Value.(*callStream); s.fs.actor == heaviest {
			return s
		}
	}
	return l.Front().Value.(*callStream) // not reached: the heaviest has one there
}

// keep adds the finished stream s (s.mu held) to the kept streams, or
// moves a delivered one to the end of the delivered ones for another
// deliveredKeep, and drops streams while the delivered ones exceed
// deliveredStreamBytes or all exceed keptStreamBytes.
func (p *Proxy) keep(s *callStream, delivered bool) {
	if s.id == "" {
		return
	}
	k := &p.kept
	var drop []*callStream
	k.mu.Lock()
	if s.dropped {
		k.mu.Unlock()
		return
	}
	k.remove(s, false)
	if delivered {
		d := k.deliveredKeep()
		s.at = time.Now()
		// The timer is set for the front of the delivered streams, the
		// first to go; it sets itself for the next (expireDelivered).
		if k.timer == nil {
			k.timer = time.AfterFunc(d, p.expireDelivered)
		} else if k.delivered.Len() == 0 {
			k.timer.Reset(d)
		}
	}
	s.kept = k.list(s).PushBack(s)
	k.bytes += s.size + keptStreamOverhead
	if !s.at.IsZero() {
		k.dbytes += s.size + keptStreamOverhead
	}
	k.account(s, 1)
	for k.bytes > keptStreamBytes || k.dbytes > deliveredStreamBytes {
		l, which := &k.delivered, 1
		if l.Len() == 0 {
			l, which = &k.waiting, 0
		}
		old := k.victim(l, which)
		k.remove(old, true)
		drop = append(drop, old)
	}
	k.mu.Unlock()
	for _, old := range drop {
		if old == s {
			s.discard()
		} else {
			old.discardDropped()
		}
	}
}

// expireDelivered drops the delivered streams whose time is up, and sets
// the timer for the next.
func (p *Proxy) expireDelivered() {
	k := &p.kept
	now := time.Now()
	var drop []*callStream
	k.mu.Lock()
	for e := k.delivered.Front(); e != nil; e = k.delivered.Front() {
		s := e.Value.(*callStream)
		if left := k.deliveredKeep() - now.Sub(s.at); left > 0 {
			k.timer.Reset(left)
			break
		}
		k.remove(s, true)
		drop = append(drop, s)
	}
	k.mu.Unlock()
	for _, s := range drop {
		s.discardDropped()
	}
}

// discardDropped discards s, dropped from the kept streams, under its
// lock: at once if the lock is free, else in a goroutine of its own. A
// resume holds it while it writes to its client, which takes as long as
// the client does to read: waiting for it held up the call (another
// client's) whose stream pushed s out, and its handler never returned.
func (s *callStream) discardDropped() {
	if s.mu.TryLock() {
		s.discard()
		s.mu.Unlock()
		return
	}
	go func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.discard()
	}()
}

// forget drops s (s.mu held): it cannot be resumed.
func (s *callStream) forget(p *Proxy) {
	if s.id == "" {
		return
	}
	p.kept.mu.Lock()
	p.kept.remove(s, true)
	p.kept.mu.Unlock()
	s.discard()
}

// discard lets go of the events of s (s.mu held), dropped, and takes it
// out of its session.
func (s *callStream) discard() {
	s.fs.streams.CompareAndDelete(s.id, s)
	s.events = nil
}

// closeStreams drops a session's streams, when it ends.
func (p *Proxy) closeStreams(fs *frontSession) {
	fs.streams.Range(func(_, v any) bool {
		s := v.(*callStream)
		s.mu.Lock()
		s.done = true // a call still in progress has no one to answer
		s.letGo()
		s.forget(p)
		s.mu.Unlock()
		return true
	})
}

// ask sends a request to the client on the call's stream and returns the
// client's result. The request's id is the proxy's, so it cannot collide
// with the SDK's requests on the same session.
func (s *callStream) ask(ctx context.Context, p *Proxy, method string, params any) (json.RawMessage, error) {
	if !s.fs.offers(method) {
		return nil, rpcError(jsonrpc.CodeInvalidRequest, "provlog: the client did not declare the capability for %s", method)
	}
	pb, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id := strconv.Quote("provlog-ask-" + strconv.FormatUint(p.nextToken.Add(1), 10))
	ch := make(chan *wireMessage, 1)
	s.fs.asks.Store(id, ch)
	defer s.fs.asks.Delete(id)
	if err := s.write(appendRequest(nil, []byte(id), method, pb)); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		params := `{"requestId":` + id + `,"reason":"the server's request was given up"}`
		s.write(appendRequest(nil, nil, "notifications/cancelled", []byte(params)))
		return nil, ctx.Err()
	}
}

// offers reports whether the session's client declared it serves method.
func (fs *frontSession) offers(method string) bool {
	ip := fs.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	switch method {
	case "sampling/createMessage":
		return ip.Capabilities.Sampling != nil
	case "elicitation/create":
		return ip.Capabilities.Elicitation != nil
	}
	return false
}

// deliver hands a client's response to the fast call waiting for it, and
// reports whether one was.
func (fs *frontSession) deliver(id []byte, msg *wireMessage) bool {
	v, ok := fs.asks.LoadAndDelete(string(id))
	if !ok {
		return false
	}
	v.(chan *wireMessage) <- msg
	return true
}

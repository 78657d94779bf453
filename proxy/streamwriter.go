package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"
)

// A streamWriter is the response writer the SDK's handler gets for a
// request of the HTTP front. The SDK writes a request's event stream from
// whichever goroutine has a message for it: a stdio server's progress and
// log notifications from that server's read loop (inOrder), its other
// notifications from the downstream client's handlers. A client that stops
// reading its stream would hold each of those writes, and so that server's
// answers to every client (as the stdio front's lineWriter explains). So
// what the SDK writes is queued, never waited for, and written by a
// goroutine of the streamWriter's own; the handler returns once it is
// written. As on the stdio front, a progress or log notification that finds
// [maxPipeQueue] bytes queued is dropped, and so are those after it until
// the client has read half the queue, with a warning and a count; the rest
// is queued, up to [maxStreamBehind] bytes.
//
// A client is given up, its queue let go and later writes refused, when
// a write to its connection makes no progress within [streamWriteTimeout]
// (it is written [streamWriteChunk] bytes at a time), or when what else is
// queued for it would go over maxStreamBehind (a server's endless
// resources/updated, say): a stalled client holds no more than that of the
// sidecar's memory while its call goes on.
type streamWriter struct {
	w       http.ResponseWriter
	logger  *slog.Logger
	timeout time.Duration // streamWriteTimeout, but in tests

	mu      sync.Mutex
	cond    sync.Cond
	queue   [][]byte
	queued  int  // bytes in queue
	header  bool // WriteHeader was called
	status  int  // a WriteHeader not yet passed on; 0 if none
	flush   bool // a Flush not yet passed on
	running bool // the goroutine writing the queue runs
	closed  bool // the handler returned: nothing more is taken
	err     error
	drops   dropGate
}

// streamWriteTimeout bounds how long one chunk of a stream takes to go to
// a client.
const streamWriteTimeout = 30 * time.Second

// maxStreamBehind bounds what a streamWriter holds queued for a client
// but for one write: twice the biggest message (maxEventBytes), so that an
// answer that big still goes to a slow client behind on its progress.
const maxStreamBehind = 2 * maxEventBytes

// streamWriteChunk is how much of a stream is written under one deadline.
const streamWriteChunk = 64 << 10

// errStreamClosed is what writes after the handler returned get.
var errStreamClosed = errors.New("provlog: the request's stream has ended")

func newStreamWriter(w http.ResponseWriter, logger *slog.Logger) *streamWriter {
	s := &streamWriter{w: w, logger: logger, timeout: streamWriteTimeout, drops: dropGate{
		stalled: "proxy: an HTTP client is not reading its event stream; its progress and log notifications are dropped until it does",
		reading: "proxy: the HTTP client reads its event stream again",
		ended:   "proxy: an HTTP client's event stream ended with notifications dropped",
	}}
	s.cond.L = &s.mu
	return s
}

func (s *streamWriter) Header() http.Header { return s.w.Header() }

func (s *streamWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.header {
		s.header, s.status = true, code
		s.start()
	}
}

// Write queues a copy of b, or drops it (see streamWriter).
func (s *streamWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
		return 0, s.err
	case s.closed:
		return 0, errStreamClosed
	case s.drops.drop(s.logger, len(s.queue) > 0, s.queued, len(b), droppableEvent(b)):
		return len(b), nil
	case len(s.queue) > 0 && s.queued+len(b) > maxStreamBehind:
		s.err = fmt.Errorf("provlog: the client is over %d MiB behind on its event stream; given up", maxStreamBehind>>20)
		s.logger.Warn("proxy: writing an HTTP client's event stream failed; the rest of it is dropped", "error", s.err)
		s.queue, s.queued = nil, 0
		return 0, s.err
	}
	s.queue = append(s.queue, bytes.Clone(b))
	s.queued += len(b)
	s.start()
	return len(b), nil
}

// Flush has what was written sent to the client once it is written.
func (s *streamWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush = true
	s.start()
}

// start has the goroutine write what is queued (s.mu held).
func (s *streamWriter) start() {
	if !s.running && s.err == nil {
		s.running = true
		go s.run()
	}
	s.cond.Broadcast()
}

// run writes the queue until the handler returned and all of it is
// written, or a write failed.
func (s *streamWriter) run() {
	rc := http.NewResponseController(s.w)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.err == nil {
		status, queue, flush := s.status, s.queue, s.flush
		if status == 0 && len(queue) == 0 && !flush {
			if s.closed {
				break
			}
			s.cond.Wait()
			continue
		}
		s.status, s.queue, s.queued, s.flush = 0, nil, 0, false
		s.mu.Unlock()
		err := s.write(rc, status, queue, flush)
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
			s.logger.Warn("proxy: writing an HTTP client's event stream failed; the rest of it is dropped", "error", err)
		}
	}
	s.queue, s.queued = nil, 0
	s.drops.finish(s.logger)
	s.running = false
	s.cond.Broadcast()
}

// write passes a WriteHeader (if status is not 0), the queue and a Flush
// (if flush) on to the connection, each chunk under its deadline.
func (s *streamWriter) write(rc *http.ResponseController, status int, queue [][]byte, flush bool) error {
	if status != 0 {
		s.w.WriteHeader(status)
	}
	var err error
	for _, b := range queue {
		if err = writeTimed(rc, s.w, b, s.timeout); err != nil {
			break
		}
	}
	if err == nil && flush {
		rc.SetWriteDeadline(time.Now().Add(s.timeout))
		err = rc.Flush()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("provlog: the client took nothing of its event stream for %v; given up", s.timeout)
	}
	rc.SetWriteDeadline(time.Time{})
	return err
}

// writeTimed writes b to w, the response rc controls, streamWriteChunk
// bytes at a time, each under a write deadline timeout from its start: a
// client that takes none of a chunk for that long is given up (the write
// fails with os.ErrDeadlineExceeded), one that reads slowly is not. The
// last deadline stays set, for what net/http writes of the response
// after the handler returns; Front clears it for the connection's next
// request.
func writeTimed(rc *http.ResponseController, w io.Writer, b []byte, timeout time.Duration) error {
	for len(b) > 0 {
		n := min(len(b), streamWriteChunk)
		rc.SetWriteDeadline(time.Now().Add(timeout))
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// close waits until what was written is written (or given up); nothing
// is taken after it. The handler calls it before it returns.
func (s *streamWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.cond.Broadcast()
	for s.running {
		s.cond.Wait()
	}
}

// droppableEvent reports whether b, an event the SDK writes to a stream,
// carries a progress or log notification.
func droppableEvent(b []byte) bool {
	i := bytes.Index(b, []byte("data: "))
	return i >= 0 && droppable(b[i+len("data: "):])
}

// A dropGate decides which progress and log notifications a queue for a
// slow client drops: the one policy of the stdio front's lineWriter and
// the HTTP front's streamWriter. A notification that finds [maxPipeQueue]
// bytes queued is dropped, and so are those after it until the client has
// read half the queue (a small notification that fits is no sign that the
// client reads), each run of drops with a warning when it starts and its
// count when it ends; the session's count is logged when it ends.
type dropGate struct {
	stalled, reading, ended string // the three warnings

	dropped int // in the current run of drops
	total   int // in all
}

// drop reports whether a message of n bytes is dropped, with queued bytes
// ahead of it in the queue (pending: the queue is not empty); droppable
// says it is a progress or log notification. The caller holds its lock.
func (g *dropGate) drop(logger *slog.Logger, pending bool, queued, n int, droppable bool) bool {
	switch {
	case pending && droppable && (queued+n > maxPipeQueue || g.dropped > 0 && queued > maxPipeQueue/2):
		if g.dropped == 0 {
			logger.Warn(g.stalled)
		}
		g.dropped++
		g.total++
		return true
	case g.dropped > 0 && droppable:
		logger.Warn(g.reading, "notifications_dropped", g.dropped)
		g.dropped = 0
	}
	return false
}

// finish logs how many notifications the session dropped, if any.
func (g *dropGate) finish(logger *slog.Logger) {
	if g.total > 0 {
		logger.Warn(g.ended, "notifications_dropped", g.total)
	}
}

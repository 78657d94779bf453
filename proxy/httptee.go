package proxy

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The tees of a streamable HTTP server's answers (captureRoundTripper):
// they read the response body through under go-sdk, deliver the answers
// to captured requests to their captures, and stand in for any answer
// nested deeper than go-sdk reads, which would end its connection to the
// server (heldDeep): a request's, captured or not, fails alone.

// jsonTee reads a JSON response body through and delivers the message it
// holds when the body ends, before the reader sees any of it (the SDK
// reads such bodies whole, with io.ReadAll): an answer nested deeper than
// go-sdk reads, which would end its connection, is held for the capture
// and go-sdk reads an error answer to its id in its place (heldDeep).
// A body is read up to maxEventBytes, the bound of an event's and of a
// tools/call's answer (downstream.post): one past it is given up, and the
// captured call it answers fails alone, saying so, as an error answer
// stands in for it (any other body fails go-sdk's connection, as one it
// cannot read does); a resources/read answered with 40 MiB was read
// whole, recorded and passed on as one message too long for the client.
// (A stdio server's answers the proxy reads itself: stdioConn.)
type jsonTee struct {
	io.ReadCloser
	pending *pendingCalls
	listen  listenStream
	call    jsonrpc.ID // the captured call the body answers, if any
	// depthOnly: the answer is to a request the proxy does not capture:
	// it is not decoded, only looked at for a depth go-sdk does not read.
	depthOnly bool
	rest      []byte // the body as go-sdk reads it, not yet read
	err       error  // the end of the body, once read
}

func (j *jsonTee) Read(p []byte) (int, error) {
	if j.err == nil {
		b, err := io.ReadAll(io.LimitReader(j.ReadCloser, maxEventBytes+1))
		j.err = cmp.Or(err, io.EOF)
		if len(b) > maxEventBytes {
			b = j.tooBig()
		} else if stand := j.pending.answered(b, !j.depthOnly); stand != nil {
			b = stand
		}
		j.rest = b
		j.listen.ended(j.pending, "the server answered the subscription without an event stream")
	}
	if len(j.rest) > 0 {
		n := copy(p, j.rest)
		j.rest = j.rest[n:]
		return n, nil
	}
	return 0, j.err
}

// tooBig gives up a body past maxEventBytes: it returns the error answer
// go-sdk reads for the captured call, which fails saying why, or, for any
// other body, nothing, with the body's end the error.
func (j *jsonTee) tooBig() []byte {
	err := fmt.Errorf("the answer is over %d MiB; it is given up", maxEventBytes>>20)
	if !j.call.IsValid() {
		j.err = err
		return nil
	}
	j.pending.held(j.call, heldAnswer{err: err})
	stand, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: j.call, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: " + err.Error()}})
	return stand
}

// sseTee reads a server-sent event stream through, delivering each
// response as soon as its event is complete, before the reader sees the
// blank line that completes it. An event whose message names a method
// (go-sdk's reading of it: a request or notification, never a response)
// is not decoded: most of a listen's stream is such events, and go-sdk
// decodes them too. An event reaches the reader when it is complete,
// when go-sdk reads it (it reads events whole): an answer nested deeper
// than go-sdk reads, which would end its connection, is held for the
// capture and go-sdk reads an error answer to its id in its place
// (heldDeep).
type sseTee struct {
	io.ReadCloser
	pending *pendingCalls
	events  sseParser
	listen  listenStream
	call    jsonrpc.ID   // the captured call the stream answers, if any (as jsonTee's)
	held    []byte       // the event under way: read, not yet passed on
	spare   []byte       // held's next buffer
	out     []byte       // read and ready for the reader
	base    int          // where what is fed begins, in what fill reads it with
	last    int          // where the last event fed ends there
	stands  []sseStandIn // the events fed with a stand-in
	err     error        // the stream's end, once read
	// depthOnly: as jsonTee's; an answer nested too deep is stood in for
	// all the same.
	depthOnly bool
	// asks, if set, is the budget the server's requests the stream carries
	// draw on (askbudget.go): one past it is stood in for by an event
	// without data, which go-sdk skips.
	asks *askBudget
}

// An sseStandIn is an event of an sseTee's (from, to) whose data lines go to
// the reader as the one line that stands in for them (heldDeep).
type sseStandIn struct {
	from, to int
	stand    []byte
}

func (s *sseTee) Read(p []byte) (int, error) {
	for {
		switch {
		case len(s.out) > 0:
			n := copy(p, s.out)
			s.out = s.out[n:]
			return n, nil
		case s.err != nil && len(s.held) == 0:
			return 0, s.err
		case s.err != nil:
			// An event the stream did not end, which go-sdk reads too:
			// held to the budget if it is a request.
			keep := true
			s.events.end(func(data []byte) bool {
				keep = !namesMethod(data) || s.admitted(data)
				return true
			})
			if keep {
				s.out = s.held
			}
			s.held = nil
		case len(p) == 0:
			return 0, nil
		default:
			if n := s.fill(p); n > 0 {
				return n, nil
			}
		}
	}
}

// fill reads more of the stream, into p after the event under way if it
// fits there, else into held, and returns how much of p is ready for the
// reader: the events completed, as they came. It holds the rest, and
// puts in out what is ready and not in p.
func (s *sseTee) fill(p []byte) int {
	h, into, inP := len(s.held), p, len(s.held) < len(p)
	if inP {
		copy(p, s.held)
	} else {
		s.held = slices.Grow(s.held, 32<<10)
		into = s.held[:cap(s.held)]
	}
	n, err := s.ReadCloser.Read(into[h:])
	data := into[:h+n]
	s.base, s.last, s.stands = h, 0, s.stands[:0]
	s.events.feed(data[h:], s.deliver)
	end := s.last
	if s.events.tooBig {
		// An event past maxEventBytes: the captured call it may answer
		// fails alone, saying so, as an error answer stands in for the
		// event, and the stream is read no further; any other stream's
		// go-sdk refuses (MaxEventSize, transportFor).
		if s.call.IsValid() && err == nil {
			s.pending.held(s.call, heldAnswer{err: errEventTooBig})
			stand, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: s.call, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: " + errEventTooBig.Error()}})
			s.stands = append(s.stands, sseStandIn{s.last, len(data), stand})
			err = io.EOF
		}
		end = len(data)
	}
	if err != nil {
		s.err = err
		// go-sdk resumes a call's stream only from an event id; without
		// one, a listen whose stream the server ended is left unanswered.
		if len(s.events.lastID) == 0 {
			s.listen.ended(s.pending, "the server ended the subscription's stream")
		}
	}
	ready := data[:end]
	if len(s.stands) > 0 {
		ready = s.standIns(data[:end])
	}
	// held and spare take turns, so that what is ready stays as it is
	// while the rest is held.
	s.spare = append(s.spare[:0], data[end:]...)
	s.held, s.spare = s.spare, s.held
	if inP && len(s.stands) == 0 {
		return end
	}
	s.out = ready
	return 0
}

// standIns is data, events as they came, with the data lines of those
// with a stand-in replaced by it.
func (s *sseTee) standIns(data []byte) []byte {
	var out []byte
	from := 0
	for _, e := range s.stands {
		out = append(out, data[from:e.from]...)
		for line := range bytes.Lines(data[e.from:e.to]) {
			field, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
			if len(bytes.TrimRight(line, "\r\n")) > 0 && string(field) != "data" {
				out = append(out, line...)
			}
		}
		out = fmt.Appendf(out, "data: %s\n\n", e.stand)
		from = e.to
	}
	return append(out, data[from:]...)
}

func (s *sseTee) deliver(data []byte) bool {
	from := s.last
	s.last = s.base + s.events.fed
	if namesMethod(data) {
		if !s.admitted(data) {
			s.stands = append(s.stands, sseStandIn{from, s.last, nil})
			return true
		}
		// go-sdk reads it: as it came, or, nested too deep, as a message
		// whose params it cannot read (shallowed), which fails alone.
		if pastSDKDepth(data) {
			if stand, ok := shallowed(data); ok {
				s.stands = append(s.stands, sseStandIn{from, s.last, stand})
			}
		}
		return true
	}
	if stand := s.pending.answered(data, !s.depthOnly); stand != nil {
		s.stands = append(s.stands, sseStandIn{from, s.last, stand})
	}
	return true
}

// answered takes data, an answer a tee read: decoded and delivered to its
// capture if decode (the tee's request is captured); if go-sdk cannot
// read it for its depth, held for its capture, and what go-sdk reads in
// its place returned (heldDeep); nil if go-sdk reads data as it is.
func (p *pendingCalls) answered(data []byte, decode bool) (stand []byte) {
	if decode {
		if msg, err := jsonrpc.DecodeMessage(data); err == nil {
			p.deliver(msg, nil)
			return nil
		}
	}
	if !pastSDKDepth(data) {
		return nil
	}
	stand, h, id, ok := heldDeep(data)
	if !ok {
		return nil
	}
	p.held(id, h)
	return stand
}

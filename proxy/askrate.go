package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxServerRequestsPerSecond bounds the rate of an HTTP server's requests
// of the client (ping, sampling, elicitation, roots) on the streams
// go-sdk reads (captureRoundTripper's): its standalone GET stream, outside
// any call, and those of the SDK's own requests. (A call's own stream is
// httpcall.go's, bounded by maxCallAsks.) go-sdk answers each with a POST,
// and a server's 20,000 pings on its standalone stream were answered, one
// POST each, as fast as they came. Up to maxServerRequests may come at
// once; past the rate, one is answered with an error saying why, at most
// once a second, and the rest go unanswered (go-sdk never reads them, so
// no POST) until the rate allows again. A stdio server's answers cost a
// line each, and are bounded by those awaiting (maxServerRequests).
const maxServerRequestsPerSecond = 64

// askRate is the rate of a server's requests (askRate.admit): a bucket of
// maxServerRequests, refilled at maxServerRequestsPerSecond.
type askRate struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time // when tokens was last topped up (zero: never, full)
	refused time.Time // when one past the rate was last answered with an error
	dropped int       // those past it left unanswered since
}

// rateVerdict is what becomes of a server's request (askRate.admit).
type rateVerdict int

const (
	rateAdmitted rateVerdict = iota
	rateRefused              // past the rate: answered with an error
	rateDropped              // past the rate, one already refused this second: unanswered
)

// admit takes a request of the server's read at now, and says what
// becomes of it; for one refused, how many were dropped before it.
func (r *askRate) admit(now time.Time) (rateVerdict, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.IsZero() {
		r.tokens = maxServerRequests
	} else {
		r.tokens = min(maxServerRequests, r.tokens+now.Sub(r.last).Seconds()*maxServerRequestsPerSecond)
	}
	r.last = now
	switch {
	case r.tokens >= 1:
		r.tokens--
		return rateAdmitted, 0
	case now.Sub(r.refused) < time.Second:
		r.dropped++
		return rateDropped, 0
	}
	dropped := r.dropped
	r.refused, r.dropped = now, 0
	return rateRefused, dropped
}

// errAskRate is what a server is told of its request past the rate.
var errAskRate = fmt.Sprintf("provlog: the server sent more than %d requests a second (past a burst of %d); this one is refused, and those after it this second go unanswered", maxServerRequestsPerSecond, maxServerRequests)

// rated holds the event data (whose message names a method) to the
// server's rate, if it is a request, and reports whether go-sdk may read
// it. One refused is answered on the tee's behalf (sseTee.refuse).
func (s *sseTee) rated(data []byte) bool {
	id, ok := topMember(data, "id")
	if s.rate == nil || !ok || len(id) == 0 || string(id) == "null" {
		return true // a notification
	}
	v, dropped := s.rate.admit(time.Now())
	if v == rateRefused && s.refuse != nil {
		s.refuse(bytes.Clone(id), dropped)
	}
	return v == rateAdmitted
}

// refuseAsk answers the server's request id, past the rate, with an error
// (errAskRate), in a POST beside the stream of get, which carried it; it
// tells warn, if set, with how many went unanswered before it.
func (t *captureRoundTripper) refuseAsk(get *http.Request, id []byte, dropped int) {
	if t.warn != nil {
		t.warn(dropped)
	}
	body := appendResponse(nil, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: errAskRate})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(get.Context()), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, get.URL.String(), bytes.NewReader(body))
	if err != nil {
		return
	}
	for _, k := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version"} {
		if v := get.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	configHeaders(t.headers, req.Header.Set)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

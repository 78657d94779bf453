package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A server's requests of the client (sampling, elicitation, roots, ping)
// draw on one budget per connection (askBudget), however they come: over
// stdio (captureConn), on an HTTP call's event stream (callEvents) or on
// the streams go-sdk reads (sseTee: the standalone GET stream, those of
// the SDK's own requests). At most maxServerRequests await their answers
// at once, and they come at most maxServerRequestsPerSecond after a burst
// of maxServerRequestsBurst; past that, one a second is answered with an error
// saying why (errAsks) and logged, and the rest go unanswered, unread by
// go-sdk. Each bound was first met by a flood: a stdio server's 400,000
// sampling requests in one call grew the heap to 430 MB, an HTTP server's
// 200,000 on one call's stream cost ~63% of a core in POSTs, 20,000 pings
// on its standalone stream were all answered, a POST each, as were a
// stdio server's 20,000 pings outside a call, a line each. The burst and
// rate leave room for 256 calls at once that each ask the client twice
// (cmd/provlog's TestJoinedStdioOwedAnswers).
const (
	maxServerRequests          = 256
	maxServerRequestsBurst     = 1024
	maxServerRequestsPerSecond = 256
)

// errAsks is what a server is told of a request past its budget.
var errAsks = fmt.Sprintf("provlog: the server's requests are past their budget (%d awaiting their answers at once, %d a second after a burst of %d); this one is refused, and those after it this second go unanswered",
	maxServerRequests, maxServerRequestsPerSecond, maxServerRequestsBurst)

// askBudget is a connection's budget of the server's requests: those
// awaiting their answers, and a bucket of maxServerRequestsBurst refilled
// at maxServerRequestsPerSecond.
type askBudget struct {
	mu       sync.Mutex
	awaiting map[askKey]bool
	tokens   float64
	last     time.Time // when tokens was last topped up (zero: never, full)
	refused  time.Time // when one past the budget was last answered with an error
	dropped  int       // those past it left unanswered since
	// warn, if set, is told of each one refused, with how many went
	// unanswered before it: the sidecar's one line.
	warn func(dropped int)
	// refuse, if set, answers an HTTP server's request id with an error
	// (errAsks), in a POST on its session.
	refuse func(id []byte)
}

// An askKey is a request awaiting its answer: its id, and the id of the
// call on whose stream it came ("": a stream go-sdk reads, or stdio).
type askKey struct {
	on string
	id jsonrpc.ID
}

// admit takes the server's request k, read at now, and reports whether it
// is within the budget, and if not, whether to answer it with an error
// (errAsks; else it goes unanswered). An id already awaiting its answer
// (go-sdk refuses it) draws on the rate alone.
func (b *askBudget) admit(k askKey, now time.Time) (ok, refuse bool) {
	b.mu.Lock()
	if b.last.IsZero() {
		b.tokens = maxServerRequestsBurst
	} else {
		b.tokens = min(maxServerRequestsBurst, b.tokens+now.Sub(b.last).Seconds()*maxServerRequestsPerSecond)
	}
	b.last = now
	dropped := b.dropped
	switch {
	case b.tokens >= 1 && (len(b.awaiting) < maxServerRequests || b.awaiting[k]):
		b.tokens--
		if b.awaiting == nil {
			b.awaiting = map[askKey]bool{}
		}
		b.awaiting[k], ok = true, true
	case now.Sub(b.refused) < time.Second:
		b.dropped++
	default:
		b.refused, b.dropped, refuse = now, 0, true
	}
	b.mu.Unlock()
	if refuse && b.warn != nil {
		b.warn(dropped)
	}
	return ok, refuse
}

// answered notes that k's answer was sent.
func (b *askBudget) answered(k askKey) {
	b.mu.Lock()
	delete(b.awaiting, k)
	b.mu.Unlock()
}

// waiting reports whether any request awaits its answer.
func (b *askBudget) waiting() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.awaiting) > 0
}

// wireID is the id of a message as received, as go-sdk reads it (an
// id go-sdk cannot read is kept as its text).
func wireID(raw []byte) jsonrpc.ID {
	var v any
	json.Unmarshal(raw, &v)
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		id, _ = jsonrpc.MakeID(string(raw))
	}
	return id
}

// admitted holds the event data (whose message names a method) to the
// budget, if it is a request, and reports whether go-sdk may read it. One
// refused is answered on the tee's behalf (askBudget.refuse).
func (s *sseTee) admitted(data []byte) bool {
	id, ok := topMember(data, "id")
	if s.asks == nil || !ok || len(id) == 0 || string(id) == "null" {
		return true // a notification
	}
	ok, refuse := s.asks.admit(askKey{id: wireID(id)}, time.Now())
	if refuse && s.asks.refuse != nil {
		go s.asks.refuse(bytes.Clone(id))
	}
	return ok
}

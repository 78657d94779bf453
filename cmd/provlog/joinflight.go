package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/provlog/provlog/proxy"
)

// How many requests a joined serve relays at once, what its client owes
// the sidecar meanwhile, and how long it waits for the sidecar.

// maxJoinedRequests is how many of its client's requests a joined serve
// relays at once. Their answers wait for the client to read them, so
// while it does not, the bridge stops reading its requests, as the stdio
// front does; it relayed each on a goroutine of its own, holding every
// answer not read, without bound.
const maxJoinedRequests = 256

// A flight is what a joined bridge has under way: how many of its
// client's requests it relays, and the ids of the sidecar's requests
// (sampling, elicitation) it relayed to the client that the client has
// not answered, while the call or stream that asked goes on.
type flight struct {
	mu   sync.Mutex
	cond sync.Cond // n or owed changed
	n    int
	owed map[string]struct{}
}

// take takes a place for one of the client's requests, waiting for one
// while none is free and the client owes no answers (the first wait is
// logged). With none free while it owes some, it reports false at once:
// the answers that would end the requests under way may come after this
// one on stdin, and waiting for a place stopped the bridge reading them
// until the sidecar gave up on every call (TestJoinedStdioOwedAnswers).
func (b *bridge) take() bool {
	f := &b.flight
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n >= maxJoinedRequests && len(f.owed) == 0 {
		b.pausedOnce.Do(func() {
			b.logger.Warn("joined: the stdio client has many requests under way (or is not reading its stdout); reading its requests paused until one is answered", "requests", maxJoinedRequests)
		})
		f.cond.Wait()
	}
	if f.n >= maxJoinedRequests {
		return false
	}
	f.n++
	return true
}

// release frees the place of a request whose relaying ended.
func (b *bridge) release() {
	f := &b.flight
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	f.cond.Broadcast()
}

// owe notes id, a request of the sidecar's relayed to the client.
func (b *bridge) owe(id json.RawMessage) {
	f := &b.flight
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owed == nil {
		f.owed = make(map[string]struct{})
	}
	f.owed[idKey(id)] = struct{}{}
	f.cond.Broadcast()
}

// settle forgets ids, requests of the sidecar's that the client answered
// or whose call or stream ended.
func (b *bridge) settle(ids ...json.RawMessage) {
	f := &b.flight
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		delete(f.owed, idKey(id))
	}
}

// idKey is id, a JSON-RPC id, compacted.
func idKey(id json.RawMessage) string {
	var c bytes.Buffer
	if json.Compact(&c, id) != nil {
		return string(id)
	}
	return c.String()
}

// joinGrace is what a joined serve gives the sidecar beyond the longest
// time it gives any call (joinBound): to record the call and its outcome.
const joinGrace = 10 * time.Second

// joinBound is how long a joined serve waits for the sidecar's answer to
// a message: the longest server timeout of cfg (the sidecar answers every
// call by then, with the server's result or its failure) and joinGrace.
// A sidecar that takes longer is stopped or stuck: a call on one waited
// without end, until its client gave up.
func joinBound(cfg *Config) time.Duration {
	longest := time.Duration(0)
	for _, s := range cfg.Servers {
		t := s.Timeout
		if t <= 0 {
			t = proxy.DefaultTimeout
		}
		longest = max(longest, t)
	}
	if len(cfg.Servers) == 0 {
		longest = proxy.DefaultTimeout
	}
	return longest + joinGrace
}

// errSidecarSilent ends a relayed message's wait past its bound.
var errSidecarSilent = errors.New("the sidecar did not answer within the bound")

// silentText says why a message's wait ended past bound.
func silentText(bound time.Duration) string {
	return fmt.Sprintf("the provlog sidecar this process joined did not answer within %s (the config's longest server timeout and %s more): it is stopped or overloaded; a call it recorded shows in the log as made, with or without its result", bound, joinGrace)
}

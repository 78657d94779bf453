package proxy

import (
	"slices"
	"sync"
	"sync/atomic"
)

// maxRecentSecrets bounds the redacted values a server's stderr, the
// log lines quoting it and what is kept of its calls' answers are
// scrubbed of.
const maxRecentSecrets = 256

// recentSecrets are the redacted values of a server's latest calls (at
// most maxRecentSecrets). A server's own set, every actor's values, is
// scrubbed from what it prints on stderr and from the sidecar's log lines
// quoting it: the operator's. What an actor's entries record and its
// answers hold (arguments, names, error texts, kept results, the hashes
// of what was sent) is scrubbed of that actor's set alone (actorSecrets):
// scrubbed of another's too, a call's entry would mark which of the words
// its actor sent is a value another actor sent redacted, an oracle any
// actor could put its guesses of another's password to.
type recentSecrets struct {
	// held is set once a value is remembered (list never shrinks): the
	// call path scrubs a tool's name of r's values on every call, and a
	// server with nothing remembered takes no lock for it.
	held  atomic.Bool
	mu    sync.Mutex
	list  []string
	next  int
	cores *coreSet // list's (base64Cores) and their filters, nil until a scrub needs them
}

func (r *recentSecrets) remember(secrets []string) {
	if len(secrets) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held.Store(true)
	for _, s := range secrets {
		if s == "" {
			continue // in every text: each would be withheld (a URI's "?token=")
		}
		if len(r.list) < maxRecentSecrets {
			r.list = append(r.list, s)
			continue
		}
		r.list[r.next] = s
		r.next = (r.next + 1) % maxRecentSecrets
	}
	r.cores = nil
}

// none reports whether no redacted value is remembered: nothing to scrub.
func (r *recentSecrets) none() bool {
	if !r.held.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.list) == 0
}

// longest returns the length of the longest value remembered, which
// bounds the base64 of one a held stderr block may straddle a cut with
// (lineLogger.overlap).
func (r *recentSecrets) longest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.list {
		n = max(n, len(s))
	}
	return n
}

// with returns call's redacted values and r's, each once.
func (r *recentSecrets) with(call []string) []string {
	if !r.held.Load() {
		return call
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return call
	}
	out := slices.Clip(call)
	for _, s := range r.list {
		if !slices.Contains(call, s) {
			out = append(out, s)
		}
	}
	return out
}

// scrub is scrub with r's secrets, whose cores are made once for the
// lines of a server's stderr between two calls, not for each.
func (r *recentSecrets) scrub(s string) string {
	if !r.held.Load() {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return s
	}
	if r.cores == nil {
		r.cores = newCoreSet(base64Cores(r.list))
	}
	return scrubText(s, r.cores, r.list)
}

// scrubName is scrub for a name or an argument's member as a call's
// entry records it (a tool's, a prompt's, a resource's URI): values
// shorter than minSecretLen are not looked for, since each would have
// every name holding it withheld whole ("get_v7" after a pin of 7), and
// the entry would no longer say what was called.
func (r *recentSecrets) scrubName(s string) string {
	if !r.held.Load() {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	long := longSecrets(r.list)
	if len(long) == 0 {
		return s
	}
	if r.cores == nil {
		r.cores = newCoreSet(base64Cores(r.list)) // of the long values alone
	}
	return scrubText(s, r.cores, long)
}

// longSecrets returns those of secrets of at least minSecretLen bytes
// (secrets itself if all are).
func longSecrets(secrets []string) []string {
	short := func(s string) bool { return len(s) < minSecretLen }
	if !slices.ContainsFunc(secrets, short) {
		return secrets
	}
	return slices.DeleteFunc(slices.Clone(secrets), short)
}

// maxSecretActors bounds the actors whose recent redacted values a server
// keeps apart (actorSecrets); beyond it the actor longest known gives
// way. An actor's later calls are then scrubbed of its own earlier
// values no more, as after maxRecentSecrets of them.
const maxSecretActors = 256

// actorSecrets are each actor's recent redacted values of one server.
type actorSecrets struct {
	held  atomic.Bool // set once a value is remembered: until then of takes no lock (the call path asks on every call)
	mu    sync.Mutex
	m     map[string]*recentSecrets
	order []string // m's actors, the longest known first
}

// noSecrets is the set of an actor with none remembered: it scrubs
// nothing, and nothing is remembered in it.
var noSecrets recentSecrets

// of returns actor's set (noSecrets if none is remembered).
func (a *actorSecrets) of(actor string) *recentSecrets {
	if !a.held.Load() {
		return &noSecrets
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.m[actor]; r != nil {
		return r
	}
	return &noSecrets
}

// remember adds secrets to actor's set.
func (a *actorSecrets) remember(actor string, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	a.mu.Lock()
	r := a.m[actor]
	if r == nil {
		if a.m == nil {
			a.m = map[string]*recentSecrets{}
		}
		if len(a.order) == maxSecretActors {
			delete(a.m, a.order[0])
			a.order = append(a.order[:0], a.order[1:]...)
		}
		r = new(recentSecrets)
		a.m[actor] = r
		a.order = append(a.order, actor)
		a.held.Store(true)
	}
	a.mu.Unlock()
	r.remember(secrets)
}

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
// most maxRecentSecrets), scrubbed from what it prints on stderr, from
// log lines quoting it, and from its later calls' error texts and kept
// results.
type recentSecrets struct {
	// held is set once a value is remembered (list never shrinks): the
	// call path scrubs a tool's name of r's values on every call, and a
	// server with nothing remembered takes no lock for it.
	held  atomic.Bool
	mu    sync.Mutex
	list  []string
	next  int
	cores []string // list's (base64Cores), nil until a scrub needs them
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
		r.cores = base64Cores(r.list)
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
		r.cores = base64Cores(r.list) // of the long values alone
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

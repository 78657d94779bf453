package online

import "time"

// Status is the anchoring part of provlog__status and /healthz.
type Status struct {
	Interval string `json:"interval"`
	// LastRecord, LastSize and LastAnchored describe the newest stored
	// anchor; empty when there is none.
	LastRecord   string    `json:"last_record,omitempty"`
	LastSize     uint64    `json:"last_anchored_size"`
	LastAnchored time.Time `json:"last_anchored,omitzero"`
	// Unanchored counts the entries after the newest anchored
	// checkpoint, not counting that anchor's own log entry.
	Unanchored uint64 `json:"unanchored_entries"`
	// GapSeconds is the age of the newest anchor (since start when there
	// is none) while entries are unanchored, else 0.
	GapSeconds float64 `json:"gap_seconds"`
	// Stale is true when the gap exceeds three intervals.
	Stale       bool              `json:"stale"`
	LastError   string            `json:"last_error,omitempty"`
	Authorities []AuthorityStatus `json:"authorities"`
}

// AuthorityStatus is one authority's health.
type AuthorityStatus struct {
	Name                string    `json:"name"`
	Kind                string    `json:"kind"`
	URL                 string    `json:"url"`
	LastSuccess         time.Time `json:"last_success,omitzero"`
	LastError           string    `json:"last_error,omitempty"`
	LastErrorTime       time.Time `json:"last_error_time,omitzero"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	NextRetry           time.Time `json:"next_retry,omitzero"`
	// Unlinked says why this Rekor's newest kept entry has no consistency
	// proof from the one before (the proof not given, or Rekor moved to
	// a new tree); empty once a later entry is kept linked.
	Unlinked string `json:"unlinked,omitempty"`
}

// Status reports the runner's state.
func (r *Runner) Status() Status {
	size, _ := r.opts.Log.Checkpoint()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{Interval: r.cfg.Interval.String(), LastError: r.lastError, Authorities: []AuthorityStatus{}}
	since := r.started
	if r.last != nil {
		s.LastRecord, s.LastSize, s.LastAnchored = r.last.Name, r.last.Record.Size, r.last.Record.Created
		since = r.last.Record.Created
	}
	if size > s.LastSize {
		s.Unanchored = size - s.LastSize
		if r.last != nil && r.lastEntry >= int64(s.LastSize) && r.lastEntry < int64(size) {
			s.Unanchored--
		}
	}
	if s.Unanchored > 0 {
		s.GapSeconds = now.Sub(since).Seconds()
		s.Stale = now.Sub(since) > 3*r.cfg.Interval
	}
	for _, a := range r.auths {
		as := AuthorityStatus{Name: a.name, Kind: a.kind, URL: a.url, LastSuccess: a.lastSuccess, LastError: a.lastErr,
			LastErrorTime: a.lastErrAt, ConsecutiveFailures: a.failures, Unlinked: a.unlinked}
		if a.failures > 0 {
			as.NextRetry = a.nextTry
		}
		s.Authorities = append(s.Authorities, as)
	}
	return s
}

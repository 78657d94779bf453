package main

// The Pebble store's background scrub (scrub_interval) in /healthz,
// provlog__status and /metrics. A corrupt block the scrub meets fails the
// store, which the storage reason reports; this says how far it has read.

import (
	"fmt"
	"io"
	"time"

	"github.com/provlog/provlog/log/logpebble"
)

// scrubStatus is the scrub's part of the status, or nil without a scrub.
func (s *sidecar) scrubStatus() map[string]any {
	ps, ok := s.store.(*logpebble.Store)
	if !ok {
		return nil
	}
	st := ps.ScrubStatus()
	if st.Interval == 0 {
		return nil
	}
	m := map[string]any{
		"interval":   st.Interval.String(),
		"passes":     st.Passes,
		"pass_bytes": st.PassBytes,
		"bytes":      st.Bytes,
	}
	if !st.LastPass.IsZero() {
		m["last_pass"] = st.LastPass.UTC().Format(time.RFC3339)
	}
	if st.LastError != "" {
		m["last_error"] = st.LastError
		m["last_error_at"] = st.LastErrorAt.UTC().Format(time.RFC3339)
	}
	return m
}

// writeScrubMetrics writes the scrub's counters (nothing without a scrub).
func (s *sidecar) writeScrubMetrics(w io.Writer) {
	ps, ok := s.store.(*logpebble.Store)
	if !ok || ps.ScrubStatus().Interval == 0 {
		return
	}
	st := ps.ScrubStatus()
	last := 0.0
	if !st.LastPass.IsZero() {
		last = float64(st.LastPass.UnixNano()) / 1e9
	}
	failed := 0
	if st.LastError != "" {
		failed = 1
	}
	for _, m := range []struct {
		name, typ, help string
		v               float64
	}{
		{"provlog_scrub_bytes_total", "counter", "Bytes of the log store the background scrub has read.", float64(st.Bytes)},
		{"provlog_scrub_passes_total", "counter", "Complete passes of the background scrub over the log store.", float64(st.Passes)},
		{"provlog_scrub_pass_bytes", "gauge", "Bytes read in the scrub pass under way.", float64(st.PassBytes)},
		{"provlog_scrub_last_pass_timestamp_seconds", "gauge", "When the last complete scrub pass ended (0: none yet).", last},
		{"provlog_scrub_error", "gauge", "1 if a scrub slice failed (corruption or an I/O error; the log then stops writing).", float64(failed)},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", m.name, m.help, m.name, m.typ, m.name, m.v)
	}
}

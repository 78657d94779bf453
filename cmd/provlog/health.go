package main

// /healthz and the health gauges of /metrics: "ok" only when all is well,
// else the reasons.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
)

// Health reasons: the "reason" of each /healthz problem and, prefixed by
// provlog_health_, the name of its /metrics gauge.
const (
	reasonStorage    = "storage_failed"            // the log stopped writing (failed, 503)
	reasonDownstream = "downstream_down"           // a configured MCP server is down
	reasonAnchorGap  = "anchor_gap"                // entries unanchored for over N intervals
	reasonAnchorAuth = "anchor_authority_failing"  // a TSA or Rekor failed N rounds running (the others may still anchor)
	reasonWitness    = "witness_policy_not_met"    // a cosignature is overdue, too many witnesses fail, or one reported a conflict
	reasonToolChange = "tool_definition_changed"   // a server changed a tool's definition while the sidecar ran
	reasonBlobs      = "blob_store_failing"        // the blob store's last write failed (a full disk): large calls refused, kept results withheld
	reasonServed     = "checkpoint_record_failing" // the record of what /log/checkpoint served cannot be written (served.0/served.1)
	reasonSkipped    = "catalogue_skipped"         // a server's tool, prompt or resource is left out of the catalogue (clients are not shown it)
	reasonUnlinked   = "rekor_unlinked"            // a Rekor's newest entry was kept without a consistency proof from the one before, or Rekor moved to a new tree
)

var healthReasons = []string{reasonStorage, reasonDownstream, reasonAnchorGap, reasonAnchorAuth, reasonWitness, reasonToolChange, reasonBlobs, reasonServed, reasonSkipped, reasonUnlinked}

// DefaultAnchorGapIntervals is how many anchoring intervals entries may
// stay unanchored before /healthz says degraded (health.anchor_gap_intervals).
const DefaultAnchorGapIntervals = 3

// HealthConfig tunes what /healthz calls degraded.
type HealthConfig struct {
	// AnchorGapIntervals: entries unanchored for longer than this many
	// anchoring intervals make the sidecar degraded (default 3).
	AnchorGapIntervals int `yaml:"anchor_gap_intervals"`
}

// A problem is one reason the sidecar is not ok, with what a person
// needs to act on it.
type problem struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// unavailable says, for /healthz and provlog__status, why the log's
// database takes no appends for now (commits fail as log.ErrUnavailable,
// and go through again once it is back): what, in a word or two, and
// the detail.
func unavailable(err error) (what, detail string) {
	switch log.FaultReason(err) {
	case log.ErrReadOnly.Error():
		return "database read-only", "the log's database takes no writes (a hot standby, or default_transaction_read_only); calls are refused until it does: " + err.Error()
	case log.ErrDiskFull.Error():
		return "database disk full", "the log's database has no space left on its disk; calls are refused until it has: " + err.Error()
	}
	return "database unreachable", "the log's database is unreachable; calls are refused until it is back: " + err.Error()
}

// logFault is why the log takes no appends, if it does not: stopped (a
// fault, named by storageReason) or unavailable for now (its database
// unreachable or read-only, named by unavailable). What the store knows
// itself counts too: a shared one found corrupt by its reader, or
// unreachable while no commit tried it, said "ok". /healthz, its reasons
// and provlog__status all ask here.
func (s *sidecar) logFault() (stopped, unavail error) {
	var storeErr, unreachable error
	if st, ok := s.store.(interface{ Err() error }); ok {
		storeErr = st.Err()
	}
	if st, ok := s.store.(interface{ Unreachable() error }); ok {
		unreachable = st.Unreachable()
	}
	if err := cmp.Or(s.seq.Err(), storeErr); err != nil {
		return err, nil
	}
	return nil, cmp.Or(s.seq.Unavailable(), unreachable)
}

// problems lists what is wrong now, in healthReasons order.
func (s *sidecar) problems() []problem {
	var ps []problem
	if stopped, unavail := s.logFault(); stopped != nil {
		ps = append(ps, problem{reasonStorage, "the log stopped writing (" + storageReason(stopped) + "): " + stopped.Error()})
	} else if err := unavail; err != nil {
		_, detail := unavailable(err)
		ps = append(ps, problem{reasonStorage, detail})
	} else if err := s.tasks.Err(); err != nil {
		ps = append(ps, problem{reasonStorage, "the task engine stopped writing: " + err.Error()})
	}
	if err := s.blobs.Err(); err != nil {
		ps = append(ps, problem{reasonBlobs, "the blob store's last write failed: calls whose arguments are too large for an entry are refused, and results kept whole (retain: full) withheld, until one succeeds: " + err.Error()})
	}
	if d := s.servedProblem(); d != "" {
		ps = append(ps, problem{reasonServed, d})
	}
	for _, d := range s.proxy.Downstreams() {
		if d.State == proxy.StateDown {
			detail := fmt.Sprintf("server %q is down since %s", d.ID, d.Since.UTC().Format(time.RFC3339))
			if d.LastError != "" {
				detail += ": " + d.LastError
			}
			ps = append(ps, problem{reasonDownstream, detail})
		}
	}
	if s.anchors != nil {
		st := s.anchors.runner.Status()
		n := s.cfg.Health.AnchorGapIntervals
		if n <= 0 {
			n = DefaultAnchorGapIntervals
		}
		if iv, err := time.ParseDuration(st.Interval); err == nil && st.GapSeconds > float64(n)*iv.Seconds() {
			detail := fmt.Sprintf("%d entries unanchored for %s, over %d intervals of %s", st.Unanchored,
				(time.Duration(st.GapSeconds) * time.Second).String(), n, st.Interval)
			if st.LastError != "" {
				detail += "; last error: " + st.LastError
			}
			ps = append(ps, problem{reasonAnchorGap, detail})
		}
		// One authority failing while another anchors leaves no gap,
		// but it is not well (a TSA refused 44 times in a row was "ok").
		for _, a := range st.Authorities {
			if a.ConsecutiveFailures >= n {
				ps = append(ps, problem{reasonAnchorAuth, fmt.Sprintf("%s %s failed %d times running: %s", a.Kind, a.URL, a.ConsecutiveFailures, a.LastError)})
			}
		}
		// Still anchoring, but Rekor's history is no longer followed.
		for _, a := range st.Authorities {
			if a.Unlinked != "" {
				ps = append(ps, problem{reasonUnlinked, fmt.Sprintf("%s %s: its newest entry is kept unlinked (no proof that Rekor's log grew from the entry before only by appending): %s", a.Kind, a.URL, a.Unlinked)})
			}
		}
	}
	if s.witness != nil {
		size, _ := s.seq.Checkpoint()
		if d := s.witness.policyProblem(size, time.Now()); d != "" {
			ps = append(ps, problem{reasonWitness, d})
		}
	}
	for _, d := range s.proxy.Downstreams() {
		if n := len(d.ToolChanges); n > 0 {
			c := d.ToolChanges[n-1]
			ps = append(ps, problem{reasonToolChange, fmt.Sprintf("server %q changed %d tool definition(s) while the sidecar ran (see the tools entries in the log); last: %s at %s, sha256 %s → %s",
				d.ID, n, c.Tool, c.At.UTC().Format(time.RFC3339), c.Old, c.New)})
		}
	}
	for _, d := range s.proxy.Downstreams() {
		if len(d.Skipped) == 0 {
			continue
		}
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(d.Skipped)) {
			kinds = append(kinds, fmt.Sprintf("%d %s(s)", d.Skipped[k], k))
		}
		ps = append(ps, problem{reasonSkipped, fmt.Sprintf("server %q has %s left out of the catalogue, so no client is shown them (the front refused them, or each is past what a client's list page can give); provlog__status names them (skipped_tools) and why",
			d.ID, strings.Join(kinds, ", "))})
	}
	return ps
}

// servedProblem says why the record of the newest checkpoint
// /log/checkpoint served (served.0/served.1, shown.go) is not kept
// (empty: it is). Calls are still recorded: degraded, not failed.
func (s *sidecar) servedProblem() string {
	if s.servedErr == nil {
		return ""
	}
	if err := s.servedErr(); err != nil {
		return "the record of the newest checkpoint /log/checkpoint served cannot be written: " + err.Error()
	}
	return ""
}

// policyProblem says why the witness policy is not met at now (empty:
// it is), for a log whose checkpoint has size logSize: a witness reported
// a conflicting checkpoint; so many witnesses fail (their last answer
// refused or missing) that fewer than the threshold are left; or a
// cosignature is overdue, a checkpoint newer than the cosigned one having
// waited longer than the interval and the timeout (client.Cosigner.Due).
// A checkpoint still within that, as from the start until the first
// cosignature, is no fault: nothing is overdue yet. Witnesses answering
// alone do not make it met: an answer whose cosignature could not be kept
// counts as failing.
func (w *witnessing) policyProblem(logSize uint64, now time.Time) string {
	st := w.cos.Status()
	good, failing := 0, 0
	var last string
	for _, ws := range st.Witnesses {
		switch {
		case ws.Conflict != "":
			return fmt.Sprintf("witness %s reported a conflicting checkpoint: %s", ws.Name, ws.Conflict)
		case ws.LastError != "":
			failing++
			last = fmt.Sprintf("; %s: %s", ws.Name, ws.LastError)
		case !ws.LastSuccess.IsZero():
			good++
		}
	}
	switch waited := now.Sub(st.WaitingSince); {
	case len(st.Witnesses)-failing < st.Threshold:
		return fmt.Sprintf("%d of %d witnesses fail, the policy needs %d to cosign (newest cosigned size %d, log size %d)%s",
			failing, len(st.Witnesses), st.Threshold, st.CosignedSize, logSize, last)
	case logSize > st.CosignedSize && !st.WaitingSince.IsZero() && waited > w.cos.Due():
		return fmt.Sprintf("a cosignature is overdue: the log's checkpoints newer than size %d have waited %s for %d witnesses (at most %s: interval and timeout); %d of %d cosign%s",
			st.CosignedSize, waited.Round(time.Second), st.Threshold, w.cos.Due(), good, len(st.Witnesses), last)
	}
	return ""
}

func (s *sidecar) healthz(w http.ResponseWriter, r *http.Request) {
	body := s.status(r.Context())
	delete(body, "checkpoint")
	ps := body["reasons"].([]problem)
	body["status"] = "ok"
	code := http.StatusOK
	if len(ps) > 0 {
		body["status"] = "degraded"
	}
	// A log that cannot write has failed: calls are refused. The other
	// reasons leave it recording, so a liveness probe must not restart it.
	if len(ps) > 0 && ps[0].Reason == reasonStorage {
		body["status"] = "failed"
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

// writeHealthMetrics writes one gauge per health reason: the number of
// problems of that reason now (0 when all is well).
func (s *sidecar) writeHealthMetrics(w io.Writer) {
	n := map[string]int{}
	for _, p := range s.problems() {
		n[p.Reason]++
	}
	help := map[string]string{
		reasonStorage:    "1 while the log has stopped writing (calls are refused).",
		reasonDownstream: "Configured downstream MCP servers that are down.",
		reasonAnchorGap:  "1 while entries stay unanchored for longer than health.anchor_gap_intervals anchoring intervals.",
		reasonWitness:    "1 while a cosignature is overdue (a checkpoint waited longer than witness_policy interval plus timeout), fewer witnesses than its threshold are not failing, or one reported a conflict.",
		reasonBlobs:      "1 while the blob store's last write failed (calls with arguments too large for an entry are refused, kept results withheld).",
		reasonSkipped:    "Configured downstream MCP servers with a tool, prompt or resource left out of the catalogue.",
		reasonUnlinked:   "Rekors whose newest entry was kept without a consistency proof from the one before (or in a new tree).",
		reasonServed:     "1 while the record of the newest checkpoint /log/checkpoint served cannot be written (it answers 500 where it would serve a newer one).",
	}
	for _, r := range healthReasons {
		name := "provlog_health_" + r
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help[r], name, name, n[r])
	}
}

package blobs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/provlog/provlog/log"
)

// KindPurge is the kind of the entry that records a purge: which blobs
// were deleted and why. It is written before the blobs are deleted, so a
// blob an entry names is either in the store or named by a purge entry.
const KindPurge = "purge"

// MaxPurgeBlobs is the most blob names one purge entry holds; a larger
// purge is recorded in several entries.
const MaxPurgeBlobs = 512

// A PurgeEntry records the deletion of retained payloads (DESIGN §4):
// retention by age, or an erasure request by task, actor or blob. The
// log's entries and proofs stay valid, since no leaf hash covers a blob's
// bytes; the entries keep each blob's SHA-256.
type PurgeEntry struct {
	Time  time.Time
	Actor string // who asked (the operator, or the sidecar's retention)
	// Auth is the OAuth token of the request that asked, as every entry
	// such a request writes keeps it (nil for a static token's actor):
	// which client or delegation erased the payloads.
	Auth *log.Auth
	// Reason is why, in the operator's words ("retention: 30d",
	// "erasure request #123").
	Reason string
	// Criteria is what selected the blobs, as given.
	Criteria PurgeCriteria
	// Blobs are the names (hex SHA-256) of the purged blobs, sorted.
	Blobs []string
	// erasure: a parsed entry's criteria are not a before alone (the
	// entry keeps the count of blobs named, not the names, so
	// Criteria.Blobs stays empty).
	erasure bool
}

// Covers reports whether the purge erased the payload of an entry written
// at t, before the purge entry, that names one of its blobs. An erasure
// (by task, actor or blob) covers every such entry. Retention (criteria
// before alone) covers only those older than its cut: an entry newer than
// the cut keeps its blob, and the purge left it in the store (a call
// named it after retention's last look at the log, before its purge entry
// was committed).
func (p *PurgeEntry) Covers(t time.Time) bool {
	c := p.Criteria
	if c.Before.IsZero() || c.Task != "" || c.Actor != "" || len(c.Blobs) > 0 || p.erasure {
		return true
	}
	return t.Before(c.Before)
}

// PurgeCriteria selects blobs by the entries that name them. Set fields
// must all match.
type PurgeCriteria struct {
	// Before selects entries written before this time (retention).
	Before time.Time
	// Task selects the entries of one task: its own task entries and
	// the entries its claims cite as evidence.
	Task string
	// Actor selects the entries of one actor.
	Actor string
	// Blobs names blobs directly.
	Blobs []string
}

// Marshal returns the entry's canonical bytes.
func (p *PurgeEntry) Marshal() ([]byte, error) {
	if p.Reason == "" {
		return nil, errors.New("purge entry: a reason is required")
	}
	if len(p.Blobs) == 0 || len(p.Blobs) > MaxPurgeBlobs {
		return nil, fmt.Errorf("purge entry: %d blobs, want 1 to %d", len(p.Blobs), MaxPurgeBlobs)
	}
	for _, b := range p.Blobs {
		if !validSum(b) {
			return nil, fmt.Errorf("purge entry: blob name %q is not a lowercase hex SHA-256", b)
		}
	}
	crit := map[string]any{}
	if !p.Criteria.Before.IsZero() {
		crit["before"] = p.Criteria.Before.UTC().Format(log.TimeFormat)
	}
	if p.Criteria.Task != "" {
		crit["task"] = p.Criteria.Task
	}
	if p.Criteria.Actor != "" {
		crit["actor"] = p.Criteria.Actor
	}
	if len(p.Criteria.Blobs) > 0 {
		crit["blobs"] = len(p.Criteria.Blobs)
	}
	return (&log.Entry{Kind: KindPurge, Time: p.Time, Actor: p.Actor, Auth: p.Auth, Fields: map[string]any{
		"reason": p.Reason, "criteria": crit, "blobs": p.Blobs,
	}}).Marshal()
}

// ParsePurge reads a purge entry's blob names and reason.
func ParsePurge(e *log.Entry) (*PurgeEntry, error) {
	if e.Kind != KindPurge {
		return nil, fmt.Errorf("entry is a %q, not a purge entry", e.Kind)
	}
	p := &PurgeEntry{Time: e.Time, Actor: e.Actor, Auth: e.Auth}
	p.Reason, _ = e.Fields["reason"].(string)
	// Criteria other than a before that parses alone (a count of blobs
	// named, a task, an actor, a member it does not know) make it an
	// erasure: Covers then holds for every entry.
	crit, _ := e.Fields["criteria"].(map[string]any)
	for k, v := range crit {
		s, _ := v.(string)
		switch k {
		case "before":
			p.Criteria.Before, _ = time.Parse(time.RFC3339Nano, s)
		case "task":
			p.Criteria.Task = s
		case "actor":
			p.Criteria.Actor = s
		}
	}
	p.erasure = len(crit) != 1 || p.Criteria.Before.IsZero()
	list, ok := e.Fields["blobs"].([]any)
	if !ok {
		return nil, errors.New("purge entry: blobs is not a list")
	}
	for _, v := range list {
		s, ok := v.(string)
		if !ok || !validSum(s) {
			return nil, fmt.Errorf("purge entry: blob name %v is not a lowercase hex SHA-256", v)
		}
		p.Blobs = append(p.Blobs, s)
	}
	return p, nil
}

func validSum(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32 && hex.EncodeToString(b) == s
}

// Refs returns the names of the blobs an entry keeps its payloads in: a
// call's arguments moved out of the entry (args_sha256) and a retained
// result (result_retained_sha256, or result_sha256 when result_retained).
func Refs(e *log.Entry) []string {
	var out []string
	add := func(k string) {
		if s, ok := e.Fields[k].(string); ok && validSum(s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	add("args_sha256")
	add("result_retained_sha256")
	if r, _ := e.Fields["result_retained"].(bool); r {
		if _, own := e.Fields["result_retained_sha256"]; !own {
			add("result_sha256")
		}
	}
	return out
}

package evidence

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/provlog/provlog/log"
)

// String says in plain words what the evidence proves. Each line goes
// through log.Printable: it quotes what the entry and the directory hold
// (a server's tool name, an actor, the origin, the missing lines, Rekor
// URLs), which a hostile agent, server or forger wrote, and printed raw
// that would act on the reader's terminal.
func (r *Report) String() string {
	var b strings.Builder
	m := r.Manifest
	fmt.Fprintf(&b, "entry %s, %s, was in the log %s at size %s", group(m.Index), describe(r.Entry), m.Origin, group(r.Checkpoint.Size))
	var by []string
	for _, t := range r.Timestamps {
		by = append(by, fmt.Sprintf("by %s according to TSA %q", stamp(t.Time), t.TSA))
	}
	for _, e := range r.Rekor {
		by = append(by, fmt.Sprintf("by %s according to Rekor (%s) index %d", stamp(e.IntegratedTime), e.URL, e.Index))
	}
	if len(by) > 0 {
		b.WriteString(" " + strings.Join(by, " and "))
	}
	if r.Witnesses > 0 {
		fmt.Fprintf(&b, "; cosigned by %d of %d witnesses", len(r.Cosigners), r.Witnesses)
		if len(r.Cosigners) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(r.Cosigners, ", "))
		}
		if len(r.Cosigners) < r.Threshold {
			fmt.Fprintf(&b, ", fewer than the %d the policy requires", r.Threshold)
		}
	}
	fmt.Fprintf(&b, "; the receipt it was issued at size %s is consistent with that checkpoint.", group(r.Issued.Size))
	lines := []string{b.String()}
	// A cited call's outcome is its call.result, which the evidence holds
	// when there was one before the claim; a reviewed or reported claim's
	// evidence without it cannot tell none from one left out: say so.
	results := map[uint64]bool{}
	for _, c := range r.Context {
		if c.Entry != nil && c.Entry.Kind == log.KindCallResult {
			if cr, err := log.ParseCallResult(c.Entry); err == nil {
				results[cr.Call] = true
			}
		}
	}
	for _, c := range r.Context {
		if c.Role == "genesis" {
			continue
		}
		l := fmt.Sprintf("  %s entry %s: %s", c.Role, group(c.Index), describe(c.Entry))
		if c.Entry != nil && c.Entry.Kind == log.KindCall && !results[c.Index] {
			if call, err := log.ParseCall(c.Entry); err == nil && call.Outcome == nil {
				l += "; its outcome (a call.result) is not in the evidence: none was in the log before the claim, or it was left out"
			}
		}
		lines = append(lines, l)
	}
	if r.Chain != nil {
		lines = append(lines, chainLine(r.Chain))
	}
	for _, s := range m.Missing {
		lines = append(lines, "  missing: "+s)
	}
	b.Reset()
	for _, l := range lines {
		b.WriteString(log.Printable(l) + "\n")
	}
	return b.String()
}

// describe names an entry for people. What the entry holds is quoted (a
// tool's name, an actor, a task id, a claim's provenance and what it
// cites): the engine checks task entries when it writes them, but a forger
// writes any bytes into a log of their own, and unquoted they would read
// as the report's words.
func describe(e *log.Entry) string {
	str := func(k string) string { s, _ := e.Fields[k].(string); return s }
	who := fmt.Sprintf(" by %q at %s", e.Actor, e.Time.UTC().Format(time.RFC3339Nano))
	switch e.Kind {
	case log.KindCall:
		return fmt.Sprintf("a call of %q%s", str("server")+"__"+str("tool"), who)
	case log.KindGenesis:
		return "the log's genesis entry" + who
	case "task.create":
		return fmt.Sprintf("the creation of task %q (%q)%s", str("task_id"), str("title"), who)
	case "task.claim":
		ev, _ := e.Fields["evidence"].([]any)
		cites := ""
		if len(ev) > 0 {
			var s []string
			for _, x := range ev {
				s = append(s, cited(x))
			}
			cites = ", citing entries " + strings.Join(s, ", ")
		}
		return fmt.Sprintf("a completion claim (%q) on task %q%s%s", str("provenance"), str("task_id"), cites, who)
	}
	kind := e.Kind
	if strings.ContainsFunc(kind, func(r rune) bool { return !(r == '.' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) }) {
		kind = strconv.Quote(kind)
	}
	if t := str("task_id"); t != "" {
		return fmt.Sprintf("a %s entry of task %q%s", kind, t, who)
	}
	return fmt.Sprintf("a %s entry%s", kind, who)
}

// cited names an entry a claim cites: its index, or what the claim holds
// there in JSON when that is no number.
func cited(x any) string {
	if n, ok := x.(json.Number); ok {
		if _, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
			return n.String()
		}
	}
	b, err := json.Marshal(x)
	if err != nil {
		return strconv.Quote(fmt.Sprint(x))
	}
	return string(b)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// group writes n with thousands separators: 5,000.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

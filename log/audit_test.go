package log_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// TestAuditContinues: a later leg of a call (an input_required round)
// must continue a call.result of an earlier leg of the same call — same
// actor, server, tool, arguments and client, a result and not a failure
// — and only one leg may continue it. Each tampered log below is signed
// and consistent; only what its entries say is wrong, and the audit names
// the leg.
func TestAuditContinues(t *testing.T) {
	now := time.Now()
	type leg struct {
		actor, tool, args, client string
		continues                 uint64
	}
	call := func(l leg) []byte {
		c := &log.CallEntry{Time: now, Actor: l.actor, Server: "s", Tool: l.tool, Args: log.CanonicalJSON(l.args), Continues: l.continues}
		if l.client != "" {
			c.Client = &log.CallClient{Name: l.client, Version: "1"}
		}
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	result := func(actor string, i uint64, failed bool) []byte {
		r := &log.CallResultEntry{Time: now, Actor: actor, Call: i, ResultSHA256: strings.Repeat("ab", 32)}
		if failed {
			r.ResultSHA256, r.Error, r.ErrorCode = "", "boom", -32603
		}
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := leg{"a", "t", `{"q":1}`, "cl", 0}
	then := func(continues uint64) leg { l := first; l.continues = continues; return l }

	// Entry 0 is the genesis. Three legs: calls at 1, 3, 5, results at 2, 4, 6.
	src, v := newAuditLog(t, [][]byte{call(first), result("a", 1, false), call(then(2)), result("a", 3, false), call(then(4)), result("a", 5, false)})
	rep, err := log.Audit(context.Background(), src, v, "")
	if err != nil {
		t.Fatalf("a call of three legs: %v", err)
	}
	if rep.Calls != 3 || len(rep.OpenCalls) != 0 {
		t.Errorf("calls %d, open %v; want 3, none", rep.Calls, rep.OpenCalls)
	}

	other := func(change func(*leg)) []byte {
		l := first
		change(&l)
		return call(l)
	}
	for _, tc := range []struct {
		name    string
		entries [][]byte
	}{
		{"continues a call entry", [][]byte{call(first), result("a", 1, false), call(then(1))}},
		{"continues a failed call", [][]byte{call(first), result("a", 1, true), call(then(2))}},
		{"another tool's result", [][]byte{other(func(l *leg) { l.tool = "u" }), result("a", 1, false), call(then(2))}},
		{"another actor's result", [][]byte{other(func(l *leg) { l.actor = "b" }), result("b", 1, false), call(then(2))}},
		{"other arguments", [][]byte{other(func(l *leg) { l.args = `{"q":2}` }), result("a", 1, false), call(then(2))}},
		{"another client", [][]byte{other(func(l *leg) { l.client = "other" }), result("a", 1, false), call(then(2))}},
		{"no client then one", [][]byte{other(func(l *leg) { l.client = "" }), result("a", 1, false), call(then(2))}},
		{"one result continued twice", [][]byte{call(first), result("a", 1, false), call(then(2)), result("a", 3, false), call(then(2))}},
	} {
		src, v := newAuditLog(t, tc.entries)
		_, err := log.Audit(context.Background(), src, v, "")
		want := "entry " + strconv.Itoa(len(tc.entries))
		var pe *log.ProblemsError
		if !errors.As(err, &pe) || len(pe.Problems) != 1 || pe.Problems[0].Part != want {
			t.Errorf("%s: audit said %v, want one problem of %s (the leg)", tc.name, err, want)
		}
	}
}

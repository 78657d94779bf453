package log_test

import (
	"context"
	"errors"
	"slices"
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

// TestAuditReadContinues: a later leg of a bridged read must continue an
// earlier, answered leg of the same read (kind, actor, server, resource or
// prompt, arguments), once; each tampered log below is signed and
// consistent, and the audit names the leg.
func TestAuditReadContinues(t *testing.T) {
	now := time.Now()
	type leg struct {
		kind, actor, name, args, result string
		continues                       uint64
	}
	read := func(l leg) []byte {
		r := &log.ReadEntry{Kind: l.kind, Time: now, Actor: l.actor, Server: "s", ResultSHA256: l.result, ResultBytes: 10, Continues: l.continues}
		if l.kind == log.KindPromptGet {
			r.Prompt, r.Args = l.name, log.CanonicalJSON(l.args)
		} else {
			r.URI = l.name
		}
		if l.continues != 0 {
			r.InputResponsesSHA256 = strings.Repeat("cd", 32)
		}
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := leg{log.KindPromptGet, "a", "p", `{"q":"1"}`, strings.Repeat("ab", 32), 0}
	then := func(continues uint64) leg { l := first; l.continues = continues; return l }
	other := func(change func(*leg)) []byte {
		l := first
		change(&l)
		return read(l)
	}

	// Entry 0 is the genesis; three legs at 1, 2, 3, and a resource's two at 4, 5.
	res := leg{log.KindResourceRead, "a", "file:///r", "", strings.Repeat("ab", 32), 0}
	res2 := res
	res2.continues = 4
	src, v := newAuditLog(t, [][]byte{read(first), read(then(1)), read(then(2)), read(res), read(res2)})
	if _, err := log.Audit(context.Background(), src, v, ""); err != nil {
		t.Fatalf("reads of three and two legs: %v", err)
	}

	for _, tc := range []struct {
		name    string
		entries [][]byte
	}{
		{"continues a later entry", [][]byte{read(first), read(then(3))}},
		{"continues itself", [][]byte{read(first), read(then(2))}},
		{"continues another kind", [][]byte{read(res), read(then(1))}},
		{"another actor's read", [][]byte{other(func(l *leg) { l.actor = "b" }), read(then(1))}},
		{"another prompt", [][]byte{other(func(l *leg) { l.name = "other" }), read(then(1))}},
		{"other arguments", [][]byte{other(func(l *leg) { l.args = `{"q":"2"}` }), read(then(1))}},
		{"a read without a result", [][]byte{other(func(l *leg) { l.result = "" }), read(then(1))}},
		{"one leg continued twice", [][]byte{read(first), read(then(1)), read(then(1))}},
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

// TestAuditSidecarKindsBySidecar: tools, anchor and witness.conflict
// entries are written by the sidecar alone, as log.GenesisActor; one by
// another actor (a signed, consistent log, forged by whoever held the key)
// is named. Before, audit passed it.
func TestAuditSidecarKindsBySidecar(t *testing.T) {
	for _, kind := range []string{log.KindTools, log.KindAnchor, log.KindWitnessConflict} {
		for _, actor := range []string{log.GenesisActor, "mallory"} {
			fields := map[string]any{"x": 1}
			if kind == log.KindTools {
				fields = map[string]any{"server": "s", "tools": []any{}}
			}
			b, err := (&log.Entry{Kind: kind, Time: time.Now(), Actor: actor, Fields: fields}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			src, v := newAuditLog(t, [][]byte{b})
			_, err = log.Audit(context.Background(), src, v, "")
			var pe *log.ProblemsError
			bad := errors.As(err, &pe) && len(pe.Problems) == 1 && pe.Problems[0].Part == "entry 1" && strings.Contains(pe.Problems[0].Msg, "only the sidecar writes them")
			if bad != (actor != log.GenesisActor) {
				t.Errorf("a %s entry by %q: audit said %v", kind, actor, err)
			}
		}
	}
}

// TestAuditUnlistedTools: audit names the calls whose tool_sha256 no
// earlier tools entry of their server lists under their tool's name (the
// definition the call was made against is not in the log), and no other:
// a definition listed in a part of a list, or listed before and changed
// since, counts; one listed after the call, for another server or under
// another tool's name does not.
func TestAuditUnlistedTools(t *testing.T) {
	now := time.Now()
	sum := func(c byte) string { return strings.Repeat(string(c), 64) }
	tools := func(server string, part, parts int64, ts ...log.ToolSum) []byte {
		b, err := (&log.ToolsEntry{Time: now, Actor: log.GenesisActor, Server: server, Tools: ts, Part: part, Parts: parts}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	call := func(server, tool, sha string) []byte {
		b, err := (&log.CallEntry{Time: now, Actor: "a", Server: server, Tool: tool, ToolSHA256: sha, Args: log.CanonicalJSON(`{}`)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	src, v := newAuditLog(t, [][]byte{
		call("s", "echo", sum('a')), // 1: before any list
		tools("s", 1, 2, log.ToolSum{Name: "echo", SHA256: sum('a')}),
		tools("s", 2, 2, log.ToolSum{Name: "add", SHA256: sum('b')}),
		call("s", "echo", sum('a')), // 4
		call("s", "add", sum('b')),  // 5: from the list's second part
		call("s", "add", sum('a')),  // 6: echo's hash under add's name
		call("t", "echo", sum('a')), // 7: another server
		call("s", "echo", ""),       // 8: no definition named
		tools("s", 0, 0, log.ToolSum{Name: "echo", SHA256: sum('c')}),
		call("s", "echo", sum('a')), // 10: listed before, changed since
		call("s", "echo", sum('d')), // 11: never listed
	})
	rep, err := log.Audit(context.Background(), src, v, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.UnlistedTools, []uint64{1, 6, 7, 11}; !slices.Equal(got, want) {
		t.Errorf("unlisted tools at %v, want %v", got, want)
	}
}

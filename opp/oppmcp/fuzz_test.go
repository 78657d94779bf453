package oppmcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/opp/opptest"
)

// FuzzDecode feeds arbitrary arguments to the strict decoder of every tool.
// It must never panic; what it accepts holds only the tool's own arguments,
// with the declared types.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"task_id":"t_00000000000000000000000000000000"}`,
		`{"task_id":"x","provenance":["observed"],"summary":"s"}`,
		`{"task_id":"x","provenance":"observed","summary":"s","evidence":[1,2,3]}`,
		`{"evidence":[-1,1.5,"2",1e3]}`, `{"title":"a","title":"b"}`, `{"title":"\ud800"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, d := range tools {
			a, err := decode(d.params, json.RawMessage(raw))
			if err != nil {
				continue
			}
			for k := range a.s {
				if !hasParam(d.params, k, "string") {
					t.Fatalf("%s: accepted string %q it does not take", d.name, k)
				}
			}
			for k := range a.ix {
				if !hasParam(d.params, k, "indices") {
					t.Fatalf("%s: accepted indices %q it does not take", d.name, k)
				}
			}
		}
	})
}

func hasParam(ps []param, name, kind string) bool {
	for _, p := range ps {
		if p.name == name && p.kind == kind {
			return true
		}
	}
	return false
}

// FuzzTools calls the tools' handlers with arbitrary arguments, from
// bob, who owns task $T (the string "$T" in the arguments becomes its
// id), and alice, who created it, over a real log. A refused call writes
// nothing and says what was wrong; a call that wrote an entry leaves a
// state the log alone rebuilds the same, with no violation.
func FuzzTools(f *testing.F) {
	for _, s := range []string{
		`{"task_id":"$T"}`, `{"task_id":"$T","to":"carol","note":"n"}`,
		`{"task_id":"$T","provenance":"observed","summary":"s","evidence":[1]}`,
		`{"task_id":"$T","provenance":"reported","summary":"s","source":"\u200b"}`,
		`{"task_id":"$T","provenance":"reviewed","summary":"\u0000x","evidence":[0,18446744073709551615]}`,
		`{"title":"{\"kind\":\"task.accept\"}","offer_to":"bob"}`, `{"title":"\u202e\n\u001b[2J"}`,
	} {
		for k := range tools {
			f.Add(uint8(k), s, k%2 == 0)
		}
	}
	ctx := context.Background()
	l := opptest.NewLog(f, logtest.NewMemory(), "provlog.test/oppmcp-fuzz")
	e, err := opp.Open(ctx, l, l.Size(), nil)
	if err != nil {
		f.Fatal(err)
	}
	r, err := e.Create(ctx, "alice", opp.CreateArgs{Title: "fuzzed"})
	if err == nil {
		_, err = e.Accept(ctx, "bob", r.Task.ID)
	}
	if err != nil {
		f.Fatal(err)
	}
	id := r.Task.ID
	f.Fuzz(func(t *testing.T, k uint8, raw string, asBob bool) {
		d := tools[int(k)%len(tools)]
		actor := "alice"
		if asBob {
			actor = "bob"
		}
		raw = strings.ReplaceAll(raw, "$T", id)
		before := l.Size()
		res, err := handler(d, e, func(context.Context, *mcp.CallToolRequest) (string, error) { return actor, nil })(ctx,
			&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: d.name, Arguments: json.RawMessage(raw)}})
		if err != nil {
			t.Fatalf("%s %s: %v", d.name, raw, err)
		}
		after := l.Size()
		if res.IsError {
			if after != before {
				t.Fatalf("%s %s: refused, but the log grew from %d to %d", d.name, raw, before, after)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(text, "Refused by rule ") {
				t.Fatalf("%s %s: refusal %q does not name its rule", d.name, raw, text)
			}
			return
		}
		if after == before {
			return
		}
		tasks, err := opp.Rebuild(ctx, l, after)
		if err != nil {
			t.Fatal(err)
		}
		if vs := tasks.Violations(); len(vs) > 0 {
			t.Fatalf("%s %s: written, but the log rebuilds with violations %v", d.name, raw, vs)
		}
		for live, err := range e.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			rebuilt, err := tasks.Task(ctx, live.ID)
			if err != nil {
				t.Fatal(err)
			}
			lb, _ := json.Marshal(live)
			rb, _ := json.Marshal(rebuilt)
			if string(lb) != string(rb) {
				t.Fatalf("%s %s: task %s live %s, rebuilt %s", d.name, raw, live.ID, lb, rb)
			}
		}
	})
}

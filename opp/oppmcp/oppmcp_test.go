package oppmcp_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/opp/oppmcp"
	"github.com/provlog/provlog/opp/opptest"
)

var ctx = context.Background()

type testLog = opptest.Log

func newLog(tb testing.TB, store log.Storage) *testLog {
	return opptest.NewLog(tb, store, "provlog.test/oppmcp")
}

type harness struct {
	l *testLog
	e *opp.Engine
}

func newHarness(tb testing.TB) *harness {
	l := newLog(tb, logtest.NewMemory())
	e, err := opp.Open(ctx, l, l.Size(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &harness{l: l, e: e}
}

// client connects a go-sdk client over in-memory transports to a server
// whose every call is made by actor.
func (h *harness) client(tb testing.TB, actor string) *mcp.ClientSession {
	tb.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "provlog", Version: "test"}, nil)
	oppmcp.Register(srv, h.e, func(context.Context, *mcp.CallToolRequest) (string, error) { return actor, nil })
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-" + actor, Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

// call calls a tool with raw JSON arguments.
func call(tb testing.TB, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	tb.Helper()
	var a any
	if args != "" {
		a = json.RawMessage(args)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
	if err != nil {
		tb.Fatalf("%s %s: protocol error: %v", tool, args, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// ok asserts a successful result and decodes its JSON text into v.
func ok(tb testing.TB, res *mcp.CallToolResult, v any) {
	tb.Helper()
	if res.IsError {
		tb.Fatalf("tool error: %s", text(res))
	}
	if err := json.Unmarshal([]byte(text(res)), v); err != nil {
		tb.Fatalf("result text is not JSON: %v: %s", err, text(res))
	}
	sc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatal(err)
	}
	var a, b any
	json.Unmarshal(sc, &a)
	json.Unmarshal([]byte(text(res)), &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		tb.Fatalf("structuredContent %s differs from the text %s", sc, text(res))
	}
}

type written struct {
	Message     string `json:"message"`
	TaskID      string `json:"task_id"`
	State       string `json:"state"`
	Owner       string `json:"owner"`
	Reservation string `json:"reservation"`
	Entry       struct {
		Index    uint64 `json:"index"`
		LeafHash string `json:"leaf_hash"`
	} `json:"entry"`
}

// checkReceipt verifies the receipt in res's _meta for the entry it names,
// against the entry bytes in the log.
func (h *harness) checkReceipt(tb testing.TB, res *mcp.CallToolResult, w written) {
	tb.Helper()
	txt, _ := res.Meta[oppmcp.ReceiptMetaKey].(string)
	if txt == "" {
		tb.Fatalf("result carries no receipt in _meta[%q]: %v", oppmcp.ReceiptMetaKey, res.Meta)
	}
	rc, err := log.ParseReceipt([]byte(txt))
	if err != nil {
		tb.Fatal(err)
	}
	es, err := h.l.Entries(ctx, w.Entry.Index, w.Entry.Index+1)
	if err != nil {
		tb.Fatal(err)
	}
	leaf := log.LeafHash(es[0])
	if hex.EncodeToString(leaf) != w.Entry.LeafHash || rc.Index != w.Entry.Index {
		tb.Fatalf("result names entry %d %s; the log has leaf %x there, receipt index %d", w.Entry.Index, w.Entry.LeafHash, leaf, rc.Index)
	}
	if _, err := rc.Verify(leaf, h.l.Verifier); err != nil {
		tb.Fatalf("receipt does not verify: %v", err)
	}
}

func TestListTools(t *testing.T) {
	h := newHarness(t)
	cs := h.client(t, "alice")
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tool := range res.Tools {
		got[tool.Name] = true
		s, _ := json.Marshal(tool.InputSchema)
		var m map[string]any
		json.Unmarshal(s, &m)
		if m["type"] != "object" || m["additionalProperties"] != false {
			t.Errorf("%s: schema %s is not a closed object", tool.Name, s)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	for _, n := range oppmcp.Names {
		if !got[n] {
			t.Errorf("tool %s not listed", n)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d tools, want 8", len(got))
	}
}

func TestFlow(t *testing.T) {
	h := newHarness(t)
	alice, bob, carol := h.client(t, "alice"), h.client(t, "bob"), h.client(t, "carol")

	var c written
	res := call(t, alice, oppmcp.ToolCreate, `{"title":"sequence the sample","description":"all of it","offer_to":"bob"}`)
	ok(t, res, &c)
	h.checkReceipt(t, res, c)
	if c.State != "pending_acceptance" || c.Owner != "" || c.Reservation != "bob" || !strings.HasPrefix(c.TaskID, "t_") {
		t.Fatalf("created %+v", c)
	}
	id := c.TaskID

	var list struct {
		Tasks []struct {
			TaskID      string `json:"task_id"`
			Reservation string `json:"reservation"`
			AgeSeconds  *int64 `json:"age_seconds"`
		} `json:"tasks"`
	}
	res = call(t, carol, oppmcp.ToolListUnaccepted, `{}`)
	ok(t, res, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != id || list.Tasks[0].Reservation != "bob" || list.Tasks[0].AgeSeconds == nil {
		t.Fatalf("unaccepted: %s", text(res))
	}
	if res.Meta[oppmcp.ReceiptMetaKey] != nil {
		t.Error("list_unaccepted_tasks carries a receipt; it writes nothing")
	}

	var a written
	res = call(t, bob, oppmcp.ToolAccept, `{"task_id":"`+id+`"}`)
	ok(t, res, &a)
	h.checkReceipt(t, res, a)
	if a.Owner != "bob" || a.State != "accepted" {
		t.Fatalf("accepted: %+v", a)
	}
	// bob hands off to carol, who accepts and reports with a call of hers.
	var ho written
	res = call(t, bob, oppmcp.ToolHandoff, `{"task_id":"`+id+`","to":"carol","note":"over to you"}`)
	ok(t, res, &ho)
	h.checkReceipt(t, res, ho)
	ok(t, call(t, carol, oppmcp.ToolAccept, `{"task_id":"`+id+`"}`), &a)
	// Until its call.result is in the log, carol cannot have observed
	// the call's outcome.
	callIdx := appendCall(t, h.l, "carol")
	report := fmt.Sprintf(`{"task_id":%q,"provenance":"observed","summary":"ran the pipeline","evidence":[%d]}`, id, callIdx)
	if res = call(t, carol, oppmcp.ToolReport, report); !res.IsError || !strings.Contains(text(res), fmt.Sprintf("your call %d, which has no call.result", callIdx)) {
		t.Fatalf("observed claim citing a call without its result: %s", text(res))
	}
	appendCallResult(t, h.l, "carol", callIdx)
	var cl written
	res = call(t, carol, oppmcp.ToolReport, report)
	ok(t, res, &cl)
	h.checkReceipt(t, res, cl)
	if cl.State != "completed" {
		t.Fatalf("after report: %+v", cl)
	}

	var st opp.Task
	res = call(t, alice, oppmcp.ToolStatus, `{"task_id":"`+id+`"}`)
	ok(t, res, &st)
	if res.Meta[oppmcp.ReceiptMetaKey] != nil {
		t.Error("get_task_status carries a receipt; it writes nothing")
	}
	var kinds []string
	for _, ev := range st.History {
		kinds = append(kinds, ev.Kind)
		if ev.LeafHash == "" {
			t.Errorf("event %d has no leaf hash", ev.Index)
		}
	}
	if got, want := strings.Join(kinds, " "), "task.create task.accept task.handoff task.accept task.claim"; got != want {
		t.Fatalf("history %s, want %s", got, want)
	}
	if st.History[2].Snapshot == nil || st.History[2].Snapshot.Owner != "bob" {
		t.Fatalf("handoff event snapshot: %+v", st.History[2].Snapshot)
	}
	if st.History[4].Evidence[0] != callIdx || st.History[4].Provenance != opp.Observed {
		t.Fatalf("claim event: %+v", st.History[4])
	}

	// release and cancel
	var r2 written
	ok(t, call(t, alice, oppmcp.ToolCreate, `{"title":"second"}`), &r2)
	ok(t, call(t, bob, oppmcp.ToolAccept, `{"task_id":"`+r2.TaskID+`"}`), &a)
	res = call(t, bob, oppmcp.ToolRelease, `{"task_id":"`+r2.TaskID+`","note":"no time"}`)
	ok(t, res, &a)
	h.checkReceipt(t, res, a)
	if a.Owner != "" || a.State != "pending_acceptance" {
		t.Fatalf("released: %+v", a)
	}
	res = call(t, alice, oppmcp.ToolCancel, `{"task_id":"`+r2.TaskID+`"}`)
	ok(t, res, &a)
	h.checkReceipt(t, res, a)
	if a.State != "cancelled" {
		t.Fatalf("cancelled: %+v", a)
	}

	tasks, err := opp.Rebuild(ctx, h.l, h.l.Size())
	if err != nil {
		t.Fatal(err)
	}
	all := func(seq iter.Seq2[*opp.Task, error], vs []opp.Violation) any {
		var ts []*opp.Task
		for tk, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tk)
		}
		return []any{ts, vs}
	}
	rebuilt := all(tasks.All(ctx), tasks.Violations())
	live := all(h.e.All(ctx), h.e.Violations())
	if a, b := mustJSON(t, live), mustJSON(t, rebuilt); a != b {
		t.Fatalf("live state:\n%s\nrebuilt:\n%s", a, b)
	}
}

func appendCall(tb testing.TB, l *testLog, actor string) uint64 {
	tb.Helper()
	return appendEntry(tb, l, &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: actor, Fields: map[string]any{"server": "s", "tool": "t"}})
}

// appendCallResult writes the call.result of the call at index call.
func appendCallResult(tb testing.TB, l *testLog, actor string, call uint64) uint64 {
	tb.Helper()
	return appendEntry(tb, l, &log.CallResultEntry{Time: time.Now(), Actor: actor, Call: call, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
}

func appendEntry(tb testing.TB, l *testLog, e interface{ Marshal() ([]byte, error) }) uint64 {
	tb.Helper()
	b, err := e.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := l.Append(ctx, b)
	if err != nil {
		tb.Fatal(err)
	}
	return rc.Index
}

// TestRefusals sends adversarial arguments with a real client: each is an
// isError result naming the rule, with no receipt, and nothing is written.
func TestRefusals(t *testing.T) {
	h := newHarness(t)
	alice, bob := h.client(t, "alice"), h.client(t, "bob")
	var c written
	ok(t, call(t, alice, oppmcp.ToolCreate, `{"title":"t"}`), &c)
	id := c.TaskID
	ok(t, call(t, bob, oppmcp.ToolAccept, `{"task_id":"`+id+`"}`), &c)
	var cancelled written
	ok(t, call(t, alice, oppmcp.ToolCreate, `{"title":"gone"}`), &cancelled)
	ok(t, call(t, alice, oppmcp.ToolCancel, `{"task_id":"`+cancelled.TaskID+`"}`), &c)
	aliceCall := appendCall(t, h.l, "alice")

	claim := func(rest string) string { return `{"task_id":"` + id + `","summary":"done"` + rest + `}` }
	huge := strings.Repeat("x", 100<<10)
	cases := []struct {
		name, tool, args, rule, says string
		who                          *mcp.ClientSession
	}{
		{"provenance array", oppmcp.ToolReport, claim(`,"provenance":["observed"]`), "provenance", "got an array", bob},
		{"provenance two values", oppmcp.ToolReport, claim(`,"provenance":["observed","reported"]`), "provenance", "exactly one of", bob},
		{"provenance number", oppmcp.ToolReport, claim(`,"provenance":3`), "provenance", "got a number", bob},
		{"provenance null", oppmcp.ToolReport, claim(`,"provenance":null`), "provenance", "got null", bob},
		{"provenance object", oppmcp.ToolReport, claim(`,"provenance":{"observed":true}`), "provenance", "got an object", bob},
		{"provenance missing", oppmcp.ToolReport, claim(``), "provenance", "missing required argument provenance", bob},
		{"provenance empty", oppmcp.ToolReport, claim(`,"provenance":""`), "provenance", "exactly one of", bob},
		{"provenance other case", oppmcp.ToolReport, claim(`,"provenance":"OBSERVED"`), "provenance", "exactly one of", bob},
		{"provenance duplicate key", oppmcp.ToolReport, claim(`,"provenance":"reported","provenance":"observed"`), "invalid_argument", "duplicate", bob},
		{"reported without source", oppmcp.ToolReport, claim(`,"provenance":"reported"`), "source_required", "source", bob},
		{"unknown field", oppmcp.ToolReport, claim(`,"provenance":"reviewed","confidence":0.9`), "invalid_argument", `unknown argument "confidence"`, bob},
		{"actor as an argument", oppmcp.ToolAccept, `{"task_id":"` + id + `","actor":"alice"}`, "invalid_argument", `unknown argument "actor"`, bob},
		{"evidence negative", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":[-1]`), "invalid_argument", "whole numbers", bob},
		{"evidence fraction", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":[1.5]`), "invalid_argument", "whole numbers", bob},
		{"evidence string", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":["1"]`), "invalid_argument", "whole numbers", bob},
		{"evidence not array", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":1`), "invalid_argument", "an array of log indices", bob},
		{"evidence too many", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":[` + strings.Repeat("0,", 64) + `0]`), "invalid_argument", "over the limit of 64", bob},
		{"evidence nonexistent", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":[99999]`), "evidence", "does not exist", bob},
		{"evidence huge", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":[18446744073709551615]`), "evidence", "does not exist", bob},
		{"evidence overflow", oppmcp.ToolReport, claim(`,"provenance":"reviewed","evidence":[18446744073709551616]`), "invalid_argument", "whole numbers", bob},
		{"observed citing a foreign call", oppmcp.ToolReport, claim(fmt.Sprintf(`,"provenance":"observed","evidence":[%d]`, aliceCall)), "evidence", `a call by "alice"`, bob},
		{"title number", oppmcp.ToolCreate, `{"title":42}`, "invalid_argument", "title must be a string, got a number", alice},
		{"title missing", oppmcp.ToolCreate, `{}`, "invalid_argument", "missing required argument title", alice},
		{"title too long", oppmcp.ToolCreate, `{"title":"` + strings.Repeat("a", 201) + `"}`, "invalid_argument", "over the limit of 200", alice},
		{"huge string", oppmcp.ToolCreate, `{"title":"t","description":"` + huge + `"}`, "invalid_argument", "over the limit of 65536", alice},
		{"arguments array", oppmcp.ToolCreate, `["title"]`, "invalid_argument", "must be a JSON object", alice},
		{"arguments string", oppmcp.ToolCreate, `"title"`, "invalid_argument", "must be a JSON object", alice},
		{"lone surrogate", oppmcp.ToolCreate, `{"title":"\ud800"}`, "invalid_argument", "not valid JSON", alice},
		{"list with arguments", oppmcp.ToolListUnaccepted, `{"all":true}`, "invalid_argument", "takes no arguments", alice},
		{"unknown task", oppmcp.ToolAccept, `{"task_id":"t_00000000000000000000000000000000"}`, "unknown_task", "no task", alice},
		{"task id path", oppmcp.ToolStatus, `{"task_id":"../../x"}`, "unknown_task", "not a task id", alice},
		{"another actor's task", oppmcp.ToolReport, claim(`,"provenance":"reviewed"`), "not_owner", "owned by bob", alice},
		{"accept owned", oppmcp.ToolAccept, `{"task_id":"` + id + `"}`, "owned_by_another", "owned by bob", alice},
		{"handoff to self", oppmcp.ToolHandoff, `{"task_id":"` + id + `","to":"bob"}`, "handoff_target", "yourself", bob},
		{"handoff to empty", oppmcp.ToolHandoff, `{"task_id":"` + id + `","to":""}`, "handoff_target", "to is empty", bob},
		{"accept after cancel", oppmcp.ToolAccept, `{"task_id":"` + cancelled.TaskID + `"}`, "task_finished", "cancelled", bob},
		{"cancel by non-creator", oppmcp.ToolCancel, `{"task_id":"` + id + `"}`, "not_creator", "only the creator", bob},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.l.Size()
			res := call(t, c.who, c.tool, c.args)
			if !res.IsError {
				t.Fatalf("not refused: %s", text(res))
			}
			txt := text(res)
			if !strings.Contains(txt, "rule "+c.rule+":") || !strings.Contains(txt, c.says) {
				t.Fatalf("refusal %q does not name rule %s and say %q", txt, c.rule, c.says)
			}
			t.Log(txt)
			if len(txt) > 2000 {
				t.Errorf("refusal is %d bytes", len(txt))
			}
			if res.Meta[oppmcp.ReceiptMetaKey] != nil {
				t.Error("a refusal carries a receipt")
			}
			if h.l.Size() != before {
				t.Fatalf("log grew on a refusal")
			}
		})
	}
}

func TestIdentityError(t *testing.T) {
	h := newHarness(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "provlog", Version: "test"}, nil)
	oppmcp.Register(srv, h.e, func(context.Context, *mcp.CallToolRequest) (string, error) {
		return "", errors.New("no bearer token")
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := h.l.Size()
	res := call(t, cs, oppmcp.ToolCreate, `{"title":"t"}`)
	if !res.IsError || !strings.Contains(text(res), "rule identity:") {
		t.Fatalf("got %s", text(res))
	}
	if h.l.Size() != before {
		t.Fatal("wrote without an identity")
	}
}

// httpServer serves the OPP tools over streamable HTTP behind bearer-token
// auth in which token "tok-X" is actor X; the actor comes from the token,
// as the sidecar's does.
func httpServer(tb testing.TB, e *opp.Engine) *httptest.Server {
	return httpServerOpts(tb, e, nil)
}

func httpServerOpts(tb testing.TB, e *opp.Engine, opts *mcp.StreamableHTTPOptions) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "provlog", Version: "test"}, nil)
	oppmcp.Register(srv, e, func(_ context.Context, req *mcp.CallToolRequest) (string, error) {
		if req.Extra == nil || req.Extra.TokenInfo == nil {
			return "", errors.New("no bearer token")
		}
		return req.Extra.TokenInfo.UserID, nil
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		a, found := strings.CutPrefix(tok, "tok-")
		if !found {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: a, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	ts := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
	tb.Cleanup(ts.Close)
	return ts
}

type bearer struct {
	tok  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.base.RoundTrip(r)
}

func httpClient(tb testing.TB, ts *httptest.Server, actor string) *mcp.ClientSession {
	tb.Helper()
	hc := &http.Client{Transport: bearer{tok: "tok-" + actor, base: ts.Client().Transport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-" + actor, Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// TestHTTPConcurrentAccept: 200 clients with distinct actors accept one
// task at once over HTTP; one wins, 199 get a clear refusal, and the log
// holds exactly one task.accept.
func TestHTTPConcurrentAccept(t *testing.T) {
	h := newHarness(t)
	ts := httpServer(t, h.e)
	creator := httpClient(t, ts, "creator")
	var c written
	ok(t, call(t, creator, oppmcp.ToolCreate, `{"title":"race"}`), &c)
	before := h.l.Size()

	const n = 200
	clients := make([]*mcp.ClientSession, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[i] = httpClient(t, ts, fmt.Sprintf("agent-%03d", i))
		}()
	}
	wg.Wait()
	results := make([]*mcp.CallToolResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = clients[i].CallTool(ctx, &mcp.CallToolParams{Name: oppmcp.ToolAccept, Arguments: map[string]any{"task_id": c.TaskID}})
		}()
	}
	close(start)
	wg.Wait()
	wins, winner := 0, ""
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		if !res.IsError {
			wins++
			winner = fmt.Sprintf("agent-%03d", i)
			if res.Meta[oppmcp.ReceiptMetaKey] == nil {
				t.Error("the winning accept has no receipt")
			}
			continue
		}
		if !strings.Contains(text(res), "rule owned_by_another:") {
			t.Errorf("client %d: unclear refusal %q", i, text(res))
		}
	}
	if wins != 1 {
		t.Fatalf("%d accepts won, want 1", wins)
	}
	es, err := h.l.Entries(ctx, before, h.l.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Fatalf("%d entries written, want 1", len(es))
	}
	e, _ := log.ParseEntry(es[0])
	if e.Kind != opp.KindAccept || e.Actor != winner {
		t.Fatalf("entry %s by %s, want task.accept by %s", e.Kind, e.Actor, winner)
	}
	st, _ := h.e.Status(ctx, c.TaskID)
	if st.Owner != winner {
		t.Fatalf("owner %s, want %s", st.Owner, winner)
	}
}

// BenchmarkHTTPOps measures task operations per second over streamable
// HTTP with 32 concurrent clients, each on its own tasks: create, accept
// and report_completion, each durable before it is answered.
func BenchmarkHTTPOps(b *testing.B) {
	b.Run("store=pebble", func(b *testing.B) {
		s, err := logpebble.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		benchHTTP(b, s, nil)
	})
	b.Run("store=pebble/json-response", func(b *testing.B) {
		s, err := logpebble.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		benchHTTP(b, s, &mcp.StreamableHTTPOptions{JSONResponse: true})
	})
	b.Run("store=memory", func(b *testing.B) { benchHTTP(b, logtest.NewMemory(), nil) })
}

func benchHTTP(b *testing.B, store log.Storage, opts *mcp.StreamableHTTPOptions) {
	l := newLog(b, store)
	e, err := opp.Open(ctx, l, l.Size(), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{l: l, e: e}
	ts := httpServerOpts(b, h.e, opts)
	const clients = 32
	cs := make([]*mcp.ClientSession, clients)
	for i := range cs {
		cs[i] = httpClient(b, ts, fmt.Sprintf("bench-%d", i))
	}
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[i]
			for range work {
				var w written
				must := func(res *mcp.CallToolResult, err error) *mcp.CallToolResult {
					if err != nil || res.IsError {
						b.Errorf("%v %v", err, res)
					}
					return res
				}
				res := must(c.CallTool(ctx, &mcp.CallToolParams{Name: oppmcp.ToolCreate, Arguments: map[string]any{"title": "bench"}}))
				json.Unmarshal([]byte(text(res)), &w)
				must(c.CallTool(ctx, &mcp.CallToolParams{Name: oppmcp.ToolAccept, Arguments: map[string]any{"task_id": w.TaskID}}))
				must(c.CallTool(ctx, &mcp.CallToolParams{Name: oppmcp.ToolReport, Arguments: map[string]any{"task_id": w.TaskID, "provenance": "reviewed", "summary": "ok", "evidence": []uint64{0}}}))
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(3*b.N)/time.Since(t0).Seconds(), "ops/s")
	b.ReportMetric(0, "ns/op")
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

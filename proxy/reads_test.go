package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// entriesOf returns the log's entries of kind, parsed.
func (l *testLog) entriesOf(t *testing.T, kind string) []*log.Entry {
	t.Helper()
	var out []*log.Entry
	for i := uint64(0); i < l.size(t); i++ {
		e := mustParse(t, l.entry(t, i))
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestToolDefinitions: a server's tool list is in a tools entry from the
// start, a call names the definition it was made against, and a
// definition the server changes while the proxy runs (a "rug pull") makes
// a new tools entry and is reported in provlog__status.
func TestToolDefinitions(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "fx")}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	tools := l.entriesOf(t, log.KindTools)
	if len(tools) != 1 {
		t.Fatalf("%d tools entries after start, want 1", len(tools))
	}
	te, err := log.ParseTools(tools[0])
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, s := range te.Tools {
		sums[s.Name] = s.SHA256
	}
	if te.Server != "fx" || sums["ok"] == "" || sums["bad_schema"] == "" {
		t.Fatalf("tools entry %+v: want every listed tool, the skipped ones too", te)
	}

	call := func() *log.CallEntry {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"})
		if err != nil || res.IsError {
			t.Fatalf("fx__ok: %v", err)
		}
		e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
		c, err := log.ParseCall(e)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := call(); c.ToolSHA256 != sums["ok"] {
		t.Errorf("call names definition %s, the tools entry %s", c.ToolSHA256, sums["ok"])
	}

	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__rugpull"}); err != nil {
		t.Fatal(err)
	}
	var changed *log.ToolsEntry
	for deadline := time.Now().Add(10 * time.Second); changed == nil; {
		if es := l.entriesOf(t, log.KindTools); len(es) == 2 {
			if changed, err = log.ParseTools(es[1]); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no second tools entry after the definition changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var newSum string
	for _, s := range changed.Tools {
		if s.Name == "ok" {
			newSum = s.SHA256
		}
	}
	if newSum == "" || newSum == sums["ok"] {
		t.Fatalf("the new tools entry gives ok %q (was %q)", newSum, sums["ok"])
	}
	for deadline := time.Now().Add(10 * time.Second); call().ToolSHA256 != newSum; {
		if time.Now().After(deadline) {
			t.Fatal("calls do not name the new definition")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fx := serverStatus(t, callStatus(t, cs), "fx")
	if ch, _ := fx["tool_changes"].([]any); len(ch) != 1 || !strings.Contains(mustJSON(ch), newSum) {
		t.Errorf("status does not report the change: %v", fx["tool_changes"])
	}
	if h := p.Downstreams()[0].ToolChanges; len(h) != 1 || h[0].Tool != "ok" || h[0].New != newSum {
		t.Errorf("Downstreams reports %+v", h)
	}
}

// TestReadsAreRecorded reads a resource and gets a prompt of npm
// server-everything through the proxy: each is an entry with the hash of
// the result as the server sent it, and its receipt in the result's _meta.
func TestReadsAreRecorded(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", Command: everythingJS(t, "stdio")}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) == 0 {
		t.Fatalf("resources: %v %v", err, rl)
	}
	uri := rl.Resources[0].URI
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	re := l.readReceipt(t, rr.Meta, log.KindResourceRead)
	if re.Server != "ev" || "ev+"+re.URI != uri || re.ResultSHA256 == "" || re.ResultBytes == 0 {
		t.Errorf("resource.read entry %+v for %s", re, uri)
	}

	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) == 0 {
		t.Fatalf("prompts: %v %v", err, pl)
	}
	var name string
	for _, pr := range pl.Prompts {
		if len(pr.Arguments) == 0 {
			name = pr.Name
			break
		}
	}
	if name == "" {
		t.Fatalf("no prompt without arguments among %s", mustJSON(pl.Prompts))
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	pe := l.readReceipt(t, gp.Meta, log.KindPromptGet)
	if pe.Server != "ev" || "ev__"+pe.Prompt != name || pe.ResultSHA256 == "" || string(pe.Args) != "{}" {
		t.Errorf("prompt.get entry %+v for %s", pe, name)
	}
}

func (l *testLog) readReceipt(t *testing.T, m mcp.Meta, kind string) *log.ReadEntry {
	t.Helper()
	r, err := log.ParseReceipt([]byte(metaReceipt(m)))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	b := l.entry(t, r.Index)
	if _, err := r.Verify(log.LeafHash(b), l.verifier); err != nil {
		t.Fatal(err)
	}
	e := mustParse(t, b)
	if e.Kind != kind {
		t.Fatalf("entry %d is %s, want %s", r.Index, e.Kind, kind)
	}
	re, err := log.ParseRead(e)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// TestManyToolDefinitions: a server listing more tools than one tools
// entry holds (2,000, over pages) has them all in the log, as the parts of
// one list, before the sidecar serves; a call names the definition one of
// them holds. The list's single entry was over the entry limit, so no
// tools entry was written and every call named a definition the log
// did not hold.
func TestManyToolDefinitions(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, &mcp.ServerOptions{PageSize: 300})
	for i := range 2000 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%04d", i), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "m", URL: down.URL}}, nil)

	listed := map[string]bool{}
	es := l.entriesOf(t, log.KindTools)
	for i, e := range es {
		te, err := log.ParseTools(e)
		if err != nil {
			t.Fatal(err)
		}
		if te.Part != int64(i+1) || te.Parts != int64(len(es)) {
			t.Errorf("tools entry %d of %d is part %d of %d", i+1, len(es), te.Part, te.Parts)
		}
		for _, s := range te.Tools {
			listed[s.Name] = true
		}
	}
	if len(es) < 2 || len(listed) != 2000 {
		t.Fatalf("%d tools entries name %d tools, want all 2000 in several", len(es), len(listed))
	}
	res, err := connectMemory(t, p, nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "m__tool_1999"})
	if err != nil || res.IsError {
		t.Fatalf("m__tool_1999: %v", err)
	}
	e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
	at, _ := strconv.ParseUint(fmt.Sprint(e.Fields["call"]), 10, 64)
	c, err := log.ParseCall(mustParse(t, l.entry(t, at)))
	if err != nil {
		t.Fatal(err)
	}
	if !definedBefore(t, l, at, "tool_1999", c.ToolSHA256) {
		t.Errorf("call %d names definition %q, which no tools entry before it holds", at, c.ToolSHA256)
	}
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// claimLog is a sidecar with a task whose claim (provenance reported)
// cites two calls: done, which has its call.result, and hung, whose tool
// has not answered (a call under way, as one cut off by a crash or kill
// or refused has no outcome either).
type claimLog struct {
	base, token, taskID string
	done, hung, claim   uint64
}

func newClaimLog(t *testing.T, title, summary string) *claimLog {
	t.Helper()
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file"}, func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		return text("wrote"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return text("too late"), nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf("data: %s\norigin: provlog.example/claims\nactor: alice\nservers:\n  - id: fs\n    url: %s\n", filepath.Join(dir, "data"), down.URL))
	sc := mustOpenSidecar(t, cfg)
	t.Cleanup(sc.close)
	ctx := context.Background()
	cs, closeClient := memClient(t, sc, "agent")
	t.Cleanup(closeClient)
	t.Cleanup(func() { close(release) }) // first: the hung call ends before the client and sidecar close
	l := &claimLog{}
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": title})
	l.taskID = created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": l.taskID})
	_, rc := callTool(t, cs, "fs__write_file", map[string]any{"path": "a.md", "content": "a"})
	r, err := log.ParseReceipt([]byte(rc))
	if err != nil {
		t.Fatal(err)
	}
	l.done = callOf(t, ctx, sc, r.Index)
	from, _ := sc.seq.Checkpoint()
	go cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__hang", Arguments: map[string]any{"path": "b.md", "content": "b"}})
	l.hung = waitCall(t, ctx, sc, from, "hang")
	_, claimRC := callTool(t, cs, "report_completion", map[string]any{"task_id": l.taskID, "provenance": "reported", "source": "the build bot",
		"summary": summary, "evidence": []uint64{l.done, l.hung}})
	cr, err := log.ParseReceipt([]byte(claimRC))
	if err != nil {
		t.Fatal(err)
	}
	l.claim = cr.Index
	hs := httptest.NewServer(sc.handler())
	t.Cleanup(hs.Close)
	l.base = hs.URL
	l.token = readLocalToken(t, cfg.Data)
	return l
}

// waitCall waits for the call entry of tool at or after index from, and
// returns its index.
func waitCall(t *testing.T, ctx context.Context, sc *sidecar, from uint64, tool string) uint64 {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		size, _ := sc.seq.Checkpoint()
		es, err := sc.store.Entries(ctx, from, size)
		if err != nil {
			t.Fatal(err)
		}
		for k, b := range es {
			e, err := log.ParseEntry(b)
			if err != nil || e.Kind != log.KindCall {
				continue
			}
			if c, err := log.ParseCall(e); err == nil && c.Tool == tool {
				return from + uint64(k)
			}
		}
	}
	t.Fatalf("no call entry of %s", tool)
	return 0
}

// claimStep is the text of the timeline's claim step.
func claimStep(t *testing.T, l *claimLog) string {
	t.Helper()
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", l.base, l.token, l.taskID))
	if v != "true" {
		t.Fatalf("task %s: data-verified=%s: %s", l.taskID, v, txt)
	}
	var claim string
	if err := p.Eval(ctx, `[...document.querySelectorAll("#timeline li")].map((li) => li.innerText).find((s) => s.includes("claimed completion")) ?? ""`, &claim); err != nil {
		t.Fatal(err)
	}
	return claim
}

// TestUIClaimNoOutcome: a claim citing a call with no recorded outcome
// (here one still under way) is flagged beside the claim, as `provlog
// tasks show` flags it; the call it cites that has its call.result is not.
func TestUIClaimNoOutcome(t *testing.T) {
	l := newClaimLog(t, "write the files", "wrote a.md and b.md")
	claim := claimStep(t, l)
	flag := func(i uint64) string { return fmt.Sprintf("evidence entry %d is a call with no recorded outcome", i) }
	if !strings.Contains(claim, flag(l.hung)) {
		t.Errorf("the claim cites call %d, which has no call.result, and the page does not say so: %q", l.hung, claim)
	}
	if strings.Contains(claim, flag(l.done)) {
		t.Errorf("the page says call %d, which has its call.result, has no outcome: %q", l.done, claim)
	}
}

// TestUIAgentTextQuoted: an agent's words (a task title, a claim's
// summary) are shown as quoted agent text, never as the page's own: a
// summary reading "✓ verified by the log" must sit inside the quoted
// element, apart from the page's "(✓ verified)" mark beside it.
func TestUIAgentTextQuoted(t *testing.T) {
	const title, summary = "(✓ verified) ship the release", "✓ verified by the log"
	l := newClaimLog(t, title, summary)
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", l.base, l.token, l.taskID))
	if v != "true" {
		t.Fatalf("task %s: data-verified=%s: %s", l.taskID, v, txt)
	}
	// Every text node outside the entry's JSON and bytes that holds the
	// agent's words, and whether it is inside a quoted agent element;
	// and whether any of the page's own marks is.
	var got struct {
		Agent  []string `json:"agent"`
		Bare   []string `json:"bare"`
		Quoted int      `json:"quoted"`
		Marks  int      `json:"marks"`
	}
	script := `(() => {
		const out = { agent: [], bare: [], quoted: 0, marks: 0 };
		for (const id of ["timeline", "entry", "verdict"]) {
			const w = document.createTreeWalker(document.getElementById(id), NodeFilter.SHOW_TEXT);
			for (let n; (n = w.nextNode()); ) {
				if (n.parentElement.closest("pre")) continue;
				if (!n.data.includes("verified by the log") && !n.data.includes("ship the release")) continue;
				const q = n.parentElement.closest("q.agent");
				if (q) { out.agent.push(n.data); if (getComputedStyle(q, "::before").content !== "none") out.quoted++; }
				else out.bare.push(n.data);
			}
		}
		out.marks = [...document.querySelectorAll("#timeline .check")].filter((m) => m.closest(".agent")).length;
		return out;
	})()`
	if err := p.Eval(ctx, script, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Bare) > 0 {
		t.Errorf("the agent's words are shown as the page's own, outside a quoted agent element: %q", got.Bare)
	}
	if len(got.Agent) < 3 { // the title in the heading and the create step, the summary in the claim step
		t.Errorf("the agent's title and summary are shown quoted %d times, want at least 3: %q", len(got.Agent), got.Agent)
	}
	if got.Quoted != len(got.Agent) {
		t.Errorf("%d of %d quoted agent elements show no quotation mark", len(got.Agent)-got.Quoted, len(got.Agent))
	}
	if got.Marks > 0 {
		t.Errorf("%d of the page's own check marks are inside agent text", got.Marks)
	}
}

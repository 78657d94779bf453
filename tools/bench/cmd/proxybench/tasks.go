package main

// B: the task tools (create, accept, report_completion) through
// provlog alone.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type taskResult struct {
	windows []window
	ops     int64 // ops acknowledged overall (ramps included)
	byTool  [3]int64
	entries int64 // log entries added during the phase
	rss     float64
}

var taskTools = [3]string{"create_task", "accept_task", "report_completion"}

func (b *bench) runTasks(ctx context.Context) error {
	b.logf("B: task tools, %d sessions, %d × %v windows", b.c.taskClients, b.c.taskRounds, b.c.taskWindow)
	data := filepath.Join(b.c.dir, "data-tasks")
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	pl, err := b.newProc("provlog-tasks", nil, b.bin, "serve", "--data", data, "--http", addr)
	if err != nil {
		return err
	}
	if err := pl.start(); err != nil {
		return err
	}
	base := "http://" + addr
	if err := waitHTTP(ctx, pl, base+"/healthz", true); err != nil {
		return err
	}
	tok, err := os.ReadFile(filepath.Join(data, "local.token"))
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(tok))
	fail := func(err error) error { return fmt.Errorf("%w\nprovlog stderr:\n%s", err, pl.logTail()) }

	var sessions []*mcp.ClientSession
	defer func() {
		for _, cs := range sessions {
			cs.Close()
		}
	}()
	for range b.c.taskClients {
		cs, err := connectHTTP(ctx, base+"/mcp", token, b.c.protocol)
		if err != nil {
			return fail(fmt.Errorf("connecting to provlog: %w", err))
		}
		sessions = append(sessions, cs)
	}
	size0, err := healthSize(base)
	if err != nil {
		return fail(err)
	}
	r := &taskResult{}
	var byTool [3]atomic.Int64
	for round := range b.c.taskRounds {
		ops := make([]op, len(sessions))
		for i, cs := range sessions {
			seq := 0
			ops[i] = func(ctx context.Context, record func(time.Duration)) error {
				seq++
				return taskCycle(ctx, cs, fmt.Sprintf("proxybench %d.%d.%d", round, i, seq), record, &byTool)
			}
		}
		ramp := b.c.ramp
		if round == 0 {
			ramp *= 2
		}
		l := startLoad(ctx, ops)
		w, err := l.measure(ctx, ramp, b.c.taskWindow, map[string]int{"client": 0, "provlog": pl.pid()}, 0, base)
		r.ops += l.ops.Load()
		if err != nil {
			return fail(err)
		}
		r.windows = append(r.windows, w)
		b.logf("B window %d: %.0f ops/s", round+1, w.rate())
	}
	for i := range byTool {
		r.byTool[i] = byTool[i].Load()
	}
	size1, err := healthSize(base)
	if err != nil {
		return fail(err)
	}
	r.entries = size1 - size0
	if r.entries < r.ops {
		return fail(fmt.Errorf("the log grew by %d entries for %d acknowledged task ops", r.entries, r.ops))
	}
	if r.rss, err = vmHWM(pl.pid()); err != nil {
		return err
	}
	b.res.tasks = r
	b.collectProfile(pl)
	pl.stop()
	return nil
}

// taskCycle runs create_task → accept_task → report_completion on a new
// task, checking every result and its receipt.
func taskCycle(ctx context.Context, cs *mcp.ClientSession, title string, record func(time.Duration), byTool *[3]atomic.Int64) error {
	var id string
	for i, name := range taskTools {
		var args map[string]any
		switch i {
		case 0:
			args = map[string]any{"title": title}
		case 1:
			args = map[string]any{"task_id": id}
		case 2:
			args = map[string]any{"task_id": id, "provenance": "reviewed", "summary": "checked by proxybench"}
		}
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		d := time.Since(start)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if res.IsError {
			return fmt.Errorf("%s: refused: %s", name, text(res))
		}
		if rc, _ := res.Meta[receiptKey].(string); rc == "" {
			return fmt.Errorf("%s: result has no receipt in _meta[%q]", name, receiptKey)
		}
		if i == 0 {
			sc, _ := res.StructuredContent.(map[string]any)
			id, _ = sc["task_id"].(string)
			if id == "" {
				return fmt.Errorf("%s: no task_id in the result: %s", name, text(res))
			}
		}
		byTool[i].Add(1)
		record(d)
	}
	return nil
}

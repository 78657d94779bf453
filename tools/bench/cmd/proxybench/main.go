// Command proxybench measures what provlog's MCP proxy adds to a tools/call
// against the same downstream server called directly by the same client,
// and how many task operations per second the sidecar serves, in one run,
// and prints Markdown tables.
//
// It builds the provlog binary from the main module (or takes -provlog),
// and drives real processes: provlog, and go-sdk v1.8.0's conformance
// everything-server as the downstream ($PROVLOG_EVERYTHING_SERVER, made by
// tools/mcptest/install.sh). The client is go-sdk's mcp.Client, the same
// for the direct and the proxied path:
//
//   - A1, stdio, 1 client: client → everything-server (stdio), vs
//     client → provlog serve (stdio) → everything-server (stdio).
//   - A2, HTTP, 1 client: client → everything-server -http, vs
//     client → provlog /mcp → the same everything-server -http (url:).
//   - A3, HTTP, 32 sessions: closed-loop throughput on the same two paths,
//     in alternating windows (direct, proxied, proxied, direct, …).
//   - A4, the peak RSS (VmHWM) of each provlog process of A1–A3.
//   - B, task tools: 32 HTTP sessions, each looping create_task →
//     accept_task → report_completion on its own tasks, against
//     `provlog serve --data D --http ADDR` (embedded defaults, no
//     downstreams); every tool call is one op.
//
// Every proxied call and every task op must come back with a receipt in
// _meta["dev.provlog/receipt"], i.e. durably logged before it was answered;
// a call that fails or lacks one fails the run. All runs are bounded
// (-n samples, -window × -rounds); -quick takes about 30 s.
//
// Usage:
//
//	go run ./cmd/proxybench [-quick] [-cpuprofile-dir DIR] [flags]
//
// See tools/bench/README.md ("Proxy and task tools").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

// receiptKey is the _meta key under which provlog returns an entry's
// receipt (proxy and oppmcp.ReceiptMetaKey).
const receiptKey = "dev.provlog/receipt"

// serverID is the downstream's id in provlog's config, so its tools are
// named "everything__<tool>" behind the proxy.
const serverID = "everything"

type config struct {
	quick       bool
	n           int
	warmup      int
	block       int
	clients     int
	window      time.Duration
	ramp        time.Duration
	rounds      int
	taskClients int
	taskWindow  time.Duration
	taskRounds  int
	tool        string
	downstream  string // "npm" or "go"
	serverJS    string // npm server-everything's dist/index.js
	node        string
	echoBytes   int
	args        map[string]any // every call's arguments
	everything  string
	provlog     string
	dir         string
	keep        bool
	profDir     string
	phases      map[string]bool
	commitDelay time.Duration // <0: provlog's default
	protocol    string        // the revision every client session asks for
	targetP50   time.Duration
	targetP99   time.Duration
	minRatio    float64
	maxRSSMiB   float64
	maxCPU      time.Duration
	minTaskOps  float64
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

// parseConfig reads proxybench's flags (with -quick's sizes where no flag
// names them) and checks them and the downstream they name.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("proxybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var phases string
	fs.BoolVar(&c.quick, "quick", false, "smoke-test sizes (about 30 s); explicit flags still win")
	fs.IntVar(&c.n, "n", 2000, "latency samples per path (direct, proxied) per transport (A1, A2)")
	fs.IntVar(&c.warmup, "warmup", 200, "warm-up calls per session before latency samples")
	fs.IntVar(&c.block, "block", 50, "latency samples are taken in alternating blocks of this many calls (direct, proxied, …)")
	fs.IntVar(&c.clients, "clients", 32, "concurrent HTTP sessions per path for throughput (A3)")
	fs.DurationVar(&c.window, "window", 10*time.Second, "throughput measurement window (A3, and B unless -task-window)")
	fs.DurationVar(&c.ramp, "ramp", time.Second, "load before each window that is not counted (the first window per path gets 2×)")
	fs.IntVar(&c.rounds, "rounds", 2, "A3 windows per path, alternating direct/proxied as D P P D …")
	fs.IntVar(&c.taskClients, "task-clients", 32, "concurrent HTTP sessions for the task tools (B)")
	fs.DurationVar(&c.taskWindow, "task-window", 0, "task throughput window (default -window)")
	fs.IntVar(&c.taskRounds, "task-rounds", 2, "task throughput windows (B)")
	fs.StringVar(&c.downstream, "downstream", "npm", "downstream server: npm (server-everything, echo of -echo-bytes) or go (go-sdk's conformance everything-server, test_simple_text)")
	fs.StringVar(&c.tool, "tool", "", "downstream tool to call (default: echo for npm, test_simple_text for go; a tool other than echo gets no arguments)")
	fs.IntVar(&c.echoBytes, "echo-bytes", 1024, "length of the echo tool's message (npm)")
	fs.StringVar(&c.serverJS, "server-everything", "", "npm server-everything's dist/index.js (default under $PROVLOG_MCPTEST_DIR)")
	fs.StringVar(&c.node, "node", "node", "node binary for server-everything")
	fs.StringVar(&c.everything, "everything", os.Getenv("PROVLOG_EVERYTHING_SERVER"), "go-sdk conformance everything-server binary (default $PROVLOG_EVERYTHING_SERVER)")
	fs.StringVar(&c.provlog, "provlog", "", "provlog binary to use (default: go build ./cmd/provlog from the main module)")
	fs.StringVar(&c.dir, "dir", "", "work dir for binaries, data dirs and logs (default: a new temp dir, removed afterwards)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work dir (data dirs and process logs)")
	fs.StringVar(&c.profDir, "cpuprofile-dir", "", "read every provlog process's profiles from provlog serve --pprof and write here its CPU profile (its whole run, merged from one-second profiles) and its heap profile at the end (.heap)")
	fs.StringVar(&c.protocol, "protocol", "2025-11-25", "MCP revision every client asks for (2025-11-25: sessions; 2026-07-28: sessionless over HTTP)")
	fs.DurationVar(&c.commitDelay, "commit-delay", -1, "provlog's commit_delay (negative: its default)")
	fs.StringVar(&phases, "phases", "stdio,http,tput,tasks", "which parts to run: stdio (A1), http (A2), tput (A3), tasks (B)")
	fs.DurationVar(&c.targetP50, "target-added-p50", time.Millisecond, "Issue 12 target for added p50 latency per call at 1 client (0: not judged)")
	fs.DurationVar(&c.targetP99, "target-added-p99", 5*time.Millisecond, "Issue 12 target for added p99 latency per call at 1 client (0: not judged)")
	fs.Float64Var(&c.minRatio, "target-ratio", 0.80, "Issue 12 target: proxied/direct throughput at -clients sessions")
	fs.Float64Var(&c.maxRSSMiB, "target-rss-mib", 64, "Issue 12 target: sidecar peak RSS (MiB)")
	fs.DurationVar(&c.maxCPU, "target-cpu", 200*time.Microsecond, "Issue 12 target: provlog's own CPU time per call at -clients sessions (0: not judged)")
	fs.Float64Var(&c.minTaskOps, "target-task-ops", 2000, "Issue 4 target: task ops/s")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		quick := map[string]func(){
			"n":           func() { c.n = 300 },
			"warmup":      func() { c.warmup = 50 },
			"window":      func() { c.window = 3 * time.Second },
			"ramp":        func() { c.ramp = 500 * time.Millisecond },
			"rounds":      func() { c.rounds = 1 },
			"task-rounds": func() { c.taskRounds = 1 },
		}
		for name, f := range quick {
			if !set[name] {
				f()
			}
		}
	}
	if c.taskWindow == 0 {
		c.taskWindow = c.window
	}
	c.phases = map[string]bool{}
	for p := range strings.SplitSeq(phases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "stdio", "http", "tput", "tasks":
			c.phases[p] = true
		case "":
		default:
			return c, fmt.Errorf("-phases: unknown part %q (want stdio, http, tput, tasks)", p)
		}
	}
	if c.n < 1 || c.block < 1 || c.clients < 1 || c.taskClients < 1 || c.rounds < 1 || c.taskRounds < 1 || c.window <= 0 {
		return c, errors.New("-n, -block, -clients, -task-clients, -rounds, -task-rounds and -window must be positive")
	}
	needDown := c.phases["stdio"] || c.phases["http"] || c.phases["tput"]
	if needDown {
		if err := c.checkDownstream(); err != nil {
			return c, err
		}
		c.args = c.toolArgs()
	}

	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	b := &bench{c: c, stderr: stderr}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "proxybench-")
		if err != nil {
			return err
		}
		c.dir = d
		b.c.dir = d
		if !c.keep {
			defer os.RemoveAll(d)
		}
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	if c.profDir != "" {
		if err := os.MkdirAll(c.profDir, 0o755); err != nil {
			return err
		}
		abs, err := filepath.Abs(c.profDir)
		if err != nil {
			return err
		}
		b.c.profDir = abs
	}
	defer b.stopAll()
	return b.run(ctx, stdout)
}

// bench is one run: its config, the processes it started and the results.
type bench struct {
	c      config
	stderr io.Writer
	bin    string // provlog binary
	buildN string // how bin was made

	mu    sync.Mutex
	procs []*proc

	res results
}

type results struct {
	stdio, http       *latencyResult
	tput              *tputResult
	tasks             *taskResult
	rssStdio, rssHTTP float64  // MiB, VmHWM of the provlog processes of A1 and A2+A3
	memHTTP           memSplit // the HTTP one's resident memory when it had the most anonymous memory
	profiles          []string
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "proxybench: "+format+"\n", args...)
}

func (b *bench) run(ctx context.Context, stdout io.Writer) error {
	begin := time.Now()
	loadStart := host.LoadAvg()
	fsyncStart := fsyncProbe(b.c.dir, 200)
	date := time.Now().UTC()
	if err := b.buildProvlog(ctx); err != nil {
		return err
	}
	if b.c.phases["stdio"] {
		if err := b.runStdio(ctx); err != nil {
			return fmt.Errorf("A1 (stdio latency): %w", err)
		}
	}
	if b.c.phases["http"] || b.c.phases["tput"] {
		if err := b.runHTTP(ctx); err != nil {
			return fmt.Errorf("A2/A3 (HTTP): %w", err)
		}
	}
	if b.c.phases["tasks"] {
		if err := b.runTasks(ctx); err != nil {
			return fmt.Errorf("B (task tools): %w", err)
		}
	}
	b.print(stdout, date, [2]string{loadStart, host.LoadAvg()}, [2]probe{fsyncStart, fsyncProbe(b.c.dir, 200)}, time.Since(begin))
	return nil
}

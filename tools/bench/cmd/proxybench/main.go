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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// receiptKey is the _meta key under which provlog returns an entry's
// receipt (proxy and oppmcp.ReceiptMetaKey).
const receiptKey = "dev.provlog/receipt"

// protocolVersion is what every client session asks for.
const protocolVersion = "2025-11-25"

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
	everything  string
	provlog     string
	dir         string
	keep        bool
	profDir     string
	phases      map[string]bool
	targetP50   time.Duration
	targetP99   time.Duration
	minRatio    float64
	maxRSSMiB   float64
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
	fs.StringVar(&c.tool, "tool", "test_simple_text", "downstream tool to call (a cheap one, taking no arguments)")
	fs.StringVar(&c.everything, "everything", os.Getenv("PROVLOG_EVERYTHING_SERVER"), "go-sdk conformance everything-server binary (default $PROVLOG_EVERYTHING_SERVER)")
	fs.StringVar(&c.provlog, "provlog", "", "provlog binary to use (default: go build ./cmd/provlog from the main module)")
	fs.StringVar(&c.dir, "dir", "", "work dir for binaries, data dirs and logs (default: a new temp dir, removed afterwards)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work dir (data dirs and process logs)")
	fs.StringVar(&c.profDir, "cpuprofile-dir", "", "build provlog with a profiling hook (a -overlay file; the tree is not touched) and write a CPU profile (and a heap profile at the end, .heap) per provlog process here")
	fs.StringVar(&phases, "phases", "stdio,http,tput,tasks", "which parts to run: stdio (A1), http (A2), tput (A3), tasks (B)")
	fs.DurationVar(&c.targetP50, "target-added-p50", time.Millisecond, "Issue 3 target for added p50 latency per call at 1 client (0: not judged)")
	fs.DurationVar(&c.targetP99, "target-added-p99", 10*time.Millisecond, "Issue 3 target for added p99 latency per call at 1 client (0: not judged)")
	fs.Float64Var(&c.minRatio, "target-ratio", 0.70, "Issue 3 target: proxied/direct throughput at -clients sessions")
	fs.Float64Var(&c.maxRSSMiB, "target-rss-mib", 100, "Issue 3 target: sidecar peak RSS (MiB)")
	fs.Float64Var(&c.minTaskOps, "target-task-ops", 2000, "Issue 4 target: task ops/s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
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
			return fmt.Errorf("-phases: unknown part %q (want stdio, http, tput, tasks)", p)
		}
	}
	if c.n < 1 || c.block < 1 || c.clients < 1 || c.taskClients < 1 || c.rounds < 1 || c.taskRounds < 1 || c.window <= 0 {
		return errors.New("-n, -block, -clients, -task-clients, -rounds, -task-rounds and -window must be positive")
	}
	needDown := c.phases["stdio"] || c.phases["http"] || c.phases["tput"]
	if needDown && c.everything == "" {
		return errors.New("no everything-server: set PROVLOG_EVERYTHING_SERVER (eval \"$(bash tools/mcptest/install.sh)\" in the main module) or pass -everything")
	}
	if needDown {
		if _, err := os.Stat(c.everything); err != nil {
			return fmt.Errorf("everything-server: %w", err)
		}
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
	rssStdio, rssHTTP float64 // MiB, VmHWM of the provlog processes of A1 and A2+A3
	profiles          []string
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "proxybench: "+format+"\n", args...)
}

func (b *bench) run(ctx context.Context, stdout io.Writer) error {
	begin := time.Now()
	loadStart := loadAvg()
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
	b.print(stdout, date, [2]string{loadStart, loadAvg()}, [2]string{fsyncStart, fsyncProbe(b.c.dir, 200)}, time.Since(begin))
	return nil
}

// ---- building provlog ----

// profileHook is added to package main of cmd/provlog through go build
// -overlay when -cpuprofile-dir is set: provlog has no profiling flag, and
// the tree must not change. With PROXYBENCH_CPUPROFILE=F it profiles from
// start until SIGUSR1, then writes F (via F.tmp, so a reader never sees a
// partial file), after a heap profile (inuse after a GC) in F.heap.
const profileHook = `package main

import (
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

func init() {
	path := os.Getenv("PROXYBENCH_CPUPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		<-c
		pprof.StopCPUProfile()
		f.Close()
		if h, err := os.Create(path + ".heap"); err == nil {
			runtime.GC()
			pprof.WriteHeapProfile(h)
			h.Close()
		}
		os.Rename(path+".tmp", path)
	}()
}
`

const hookName = "zz_proxybench_profile.go"

func (b *bench) buildProvlog(ctx context.Context) error {
	if b.c.provlog != "" {
		if b.c.profDir != "" {
			return errors.New("-cpuprofile-dir needs provlog built by proxybench (drop -provlog)")
		}
		abs, err := filepath.Abs(b.c.provlog)
		if err != nil {
			return err
		}
		b.bin, b.buildN = abs, "given with -provlog"
		return nil
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	b.bin = filepath.Join(b.c.dir, "provlog")
	args := []string{"build", "-o", b.bin}
	b.buildN = "go build ./cmd/provlog in " + root
	if b.c.profDir != "" {
		hook := filepath.Join(b.c.dir, hookName)
		if err := os.WriteFile(hook, []byte(profileHook), 0o644); err != nil {
			return err
		}
		ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "cmd", "provlog", hookName): hook}})
		ovPath := filepath.Join(b.c.dir, "overlay.json")
		if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
			return err
		}
		args = append(args, "-overlay", ovPath)
		b.buildN += " with a CPU-profiling hook (-overlay)"
	}
	args = append(args, "./cmd/provlog")
	b.logf("building provlog: go %s (in %s)", strings.Join(args, " "), root)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building provlog: %v\n%s", err, out)
	}
	return nil
}

// moduleRoot finds the main module's directory: through the replace
// directive when run inside tools/bench, else relative to this file.
func moduleRoot(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/provlog/provlog")
	if out, err := cmd.Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" {
			return d, nil
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
		if _, err := os.Stat(filepath.Join(d, "cmd", "provlog", "main.go")); err == nil {
			return filepath.Clean(d), nil
		}
	}
	return "", errors.New("cannot find the provlog module: run inside tools/bench or pass -provlog")
}

// ---- processes ----

// proc is a child process proxybench started (or that a CommandTransport
// started from a Cmd proxybench made).
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     string // stderr file
	profile string // CPU profile path, "" if none
	owned   bool   // started by proxybench itself (it waits for it)
	done    chan struct{}
	stopped bool
}

func (b *bench) newProc(name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(b.c.dir, name+".log"), done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if b.c.profDir != "" && bin == b.bin {
		p.profile = filepath.Join(b.c.profDir, name+".pprof")
		os.Remove(p.profile)
		cmd.Env = append(cmd.Env, "PROXYBENCH_CPUPROFILE="+p.profile)
	}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	p.cmd = cmd
	b.mu.Lock()
	b.procs = append(b.procs, p)
	b.mu.Unlock()
	return p, nil
}

// start starts a process proxybench owns (not one a CommandTransport runs).
func (p *proc) start() error {
	p.owned = true
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return nil
}

func (p *proc) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited says whether an owned process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// collectProfile asks a profiled provlog to write its CPU profile and waits
// for the file.
func (b *bench) collectProfile(p *proc) {
	if p.profile == "" || p.cmd.Process == nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.logf("profile of %s: %v", p.name, err)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p.profile); err == nil {
			b.res.profiles = append(b.res.profiles, p.profile, p.profile+".heap")
			return
		}
	}
	b.logf("profile of %s: not written within 10 s", p.name)
}

// stop ends an owned process: SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	if !p.owned || p.stopped || p.cmd.Process == nil {
		return
	}
	p.stopped = true
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (b *bench) stopAll() {
	b.mu.Lock()
	ps := slices.Clone(b.procs)
	b.mu.Unlock()
	for _, p := range slices.Backward(ps) {
		p.stop()
	}
}

// logTail returns the last lines of a process's stderr, for errors.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHTTP waits until url answers (any status) or the process exits.
func waitHTTP(ctx context.Context, p *proc, url string, wantOK bool) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if !wantOK || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s exited before serving %s:\n%s", p.name, url, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve %s within 30 s:\n%s", p.name, url, p.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeConfig writes a provlog config with one downstream server.
func (b *bench) writeConfig(name, data string, server string) (string, error) {
	path := filepath.Join(b.c.dir, name+".yaml")
	cfg := fmt.Sprintf("data: %s\nservers:\n  - id: %s\n%s", strconv.Quote(data), serverID, server)
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// ---- /proc ----

// vmHWM returns a process's peak resident set size in MiB.
func vmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no VmHWM")
}

// cpuTime returns the user+system CPU time of a process (all threads), in
// the kernel's clock ticks (USER_HZ, 100 per second on Linux).
func cpuTime(pid int) time.Duration {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// timeWait returns the IPv4 TCP sockets in TIME_WAIT with port at either
// end, by their address pair (/proc/net/tcp). Port 0 watches nothing.
func timeWait(port int) map[string]bool {
	out := map[string]bool{}
	if port == 0 {
		return out
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return out
	}
	hexPort := fmt.Sprintf(":%04X", port)
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[3] != "06" { // 06: TIME_WAIT
			continue
		}
		if strings.HasSuffix(f[1], hexPort) || strings.HasSuffix(f[2], hexPort) {
			out[f[1]+"-"+f[2]] = true
		}
	}
	return out
}

// fsyncProbe times n 4 KiB appends each followed by fdatasync in dir (as
// logbench does): how busy the disk under the data dirs is.
func fsyncProbe(dir string, n int) string {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return "failed: " + err.Error()
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return "failed: " + err.Error()
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return "failed: " + err.Error()
		}
		lat = append(lat, time.Since(t0))
	}
	return fmt.Sprintf("p50 %s, p99 %s", ms(pct(lat, 50)), ms(pct(lat, 99)))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// filesystemOf returns "<fstype> <device> on <mountpoint>" for the mount
// holding dir, from /proc/mounts.
func filesystemOf(dir string) string {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		p = dir
	}
	p, _ = filepath.Abs(p)
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown filesystem"
	}
	best, bestLen := "unknown filesystem", -1
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		if (p == mp || mp == "/" || strings.HasPrefix(p, mp+"/")) && len(mp) > bestLen {
			best, bestLen = fmt.Sprintf("%s %s on %s", f[2], f[0], mp), len(mp)
		}
	}
	return best
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// ---- clients ----

// bearer adds the provlog bearer token to every request. The direct
// sessions use it too (the everything-server ignores it), so both paths
// run the same client code.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (t *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// clientTransport is shared by every HTTP session of the run: the default
// transport, with enough idle connections per host for -clients sessions
// (http.DefaultTransport keeps 2, which would make most of the 32
// sessions' calls open a new TCP connection).
var clientTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return t
}()

// target is one session and the tool name to call on it.
type target struct {
	cs          *mcp.ClientSession
	tool        string
	wantReceipt bool
}

func connectHTTP(ctx context.Context, endpoint, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "proxybench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: &bearer{token, clientTransport}},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
}

func connectCommand(ctx context.Context, cmd *exec.Cmd) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "proxybench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
}

// call makes one tools/call and checks its result.
func (t target) call(ctx context.Context) error {
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: t.tool, Arguments: map[string]any{}})
	if err != nil {
		return fmt.Errorf("%s: %w", t.tool, err)
	}
	if res.IsError {
		return fmt.Errorf("%s: tool error: %s", t.tool, text(res))
	}
	if t.wantReceipt {
		if r, _ := res.Meta[receiptKey].(string); r == "" {
			return fmt.Errorf("%s: result has no receipt in _meta[%q]", t.tool, receiptKey)
		}
	}
	return nil
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// checkTool fails unless the session lists the tool.
func checkTool(ctx context.Context, cs *mcp.ClientSession, name string) error {
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if tool.Name == name {
			return nil
		}
	}
	return fmt.Errorf("the server lists no tool %q", name)
}

// ---- A1, A2: latency ----

type latencyResult struct {
	direct, proxied []time.Duration
	entries         int64 // log entries the proxied calls added (-1: not read)
}

// measureLatency warms both sessions up, then times -n calls on each, in
// alternating blocks so that changes in the machine's load hit both alike.
func (b *bench) measureLatency(ctx context.Context, direct, proxied target) (*latencyResult, error) {
	for _, t := range []target{direct, proxied} {
		for range b.c.warmup {
			if err := t.call(ctx); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	r := &latencyResult{direct: make([]time.Duration, 0, b.c.n), proxied: make([]time.Duration, 0, b.c.n)}
	for len(r.proxied) < b.c.n {
		for i, t := range []target{direct, proxied} {
			out := &r.direct
			if i == 1 {
				out = &r.proxied
			}
			for j := 0; j < b.c.block && len(*out) < b.c.n; j++ {
				start := time.Now()
				if err := t.call(ctx); err != nil {
					return nil, err
				}
				*out = append(*out, time.Since(start))
			}
		}
	}
	return r, nil
}

func (b *bench) runStdio(ctx context.Context) error {
	b.logf("A1: stdio latency, %d samples per path (warm-up %d)", b.c.n, b.c.warmup)
	direct, err := b.newProc("everything-stdio-direct", nil, b.c.everything)
	if err != nil {
		return err
	}
	dcs, err := connectCommand(ctx, direct.cmd)
	if err != nil {
		return fmt.Errorf("connecting to everything-server (stdio): %w\n%s", err, direct.logTail())
	}
	defer dcs.Close()

	data := filepath.Join(b.c.dir, "data-stdio")
	cfg, err := b.writeConfig("provlog-stdio", data, fmt.Sprintf("    command: [%s]\n", strconv.Quote(b.c.everything)))
	if err != nil {
		return err
	}
	pl, err := b.newProc("provlog-stdio", nil, b.bin, "serve", "--config", cfg)
	if err != nil {
		return err
	}
	pcs, err := connectCommand(ctx, pl.cmd)
	if err != nil {
		return fmt.Errorf("connecting to provlog serve (stdio): %w\n%s", err, pl.logTail())
	}
	defer pcs.Close()
	ptool := serverID + "__" + b.c.tool
	if err := checkTool(ctx, dcs, b.c.tool); err != nil {
		return err
	}
	if err := checkTool(ctx, pcs, ptool); err != nil {
		return fmt.Errorf("provlog (stdio): %w", err)
	}
	r, err := b.measureLatency(ctx, target{cs: dcs, tool: b.c.tool}, target{cs: pcs, tool: ptool, wantReceipt: true})
	if err != nil {
		return fmt.Errorf("%w\nprovlog stderr:\n%s", err, pl.logTail())
	}
	r.entries = -1
	b.res.stdio = r
	if b.res.rssStdio, err = vmHWM(pl.pid()); err != nil {
		return fmt.Errorf("reading provlog's VmHWM: %w", err)
	}
	b.collectProfile(pl)
	return nil
}

// ---- A2, A3: HTTP ----

type window struct {
	proxied bool
	calls   int64
	elapsed time.Duration
	lat     []time.Duration
	cpu     map[string]time.Duration // CPU time per process in the window
	closed  int                      // TCP connections to the watched port closed in the window
	seq     seqStats                 // provlog's sequencer during the window
}

// seqStats are provlog's sequencer counters from /metrics.
type seqStats struct {
	appends, commits, commitSeconds float64
}

func (a seqStats) sub(b seqStats) seqStats {
	return seqStats{a.appends - b.appends, a.commits - b.commits, a.commitSeconds - b.commitSeconds}
}

// scrapeSeq reads the sequencer counters from provlog's /metrics ("" or a
// failure: zeros).
func scrapeSeq(base string) seqStats {
	var s seqStats
	if base == "" {
		return s
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for l := range strings.SplitSeq(string(body), "\n") {
		name, v, ok := strings.Cut(l, " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		switch name {
		case "provlog_appends_total":
			s.appends = f
		case "provlog_commits_total":
			s.commits = f
		case "provlog_commit_seconds_total":
			s.commitSeconds = f
		}
	}
	return s
}

func (w window) rate() float64 { return float64(w.calls) / w.elapsed.Seconds() }

type tputResult struct {
	windows []window
	entries int64 // log entries the proxied calls of A3 added
	calls   int64 // proxied calls acknowledged in A3, windows and ramps
}

// healthSize reads the log size from provlog's /healthz.
func healthSize(base string) (int64, error) {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Size   int64  `json:"size"`
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "ok" {
		return 0, fmt.Errorf("provlog /healthz status %q", body.Status)
	}
	return body.Size, nil
}

func (b *bench) runHTTP(ctx context.Context) error {
	esAddr, err := freeAddr()
	if err != nil {
		return err
	}
	es, err := b.newProc("everything-http", nil, b.c.everything, "-http", esAddr)
	if err != nil {
		return err
	}
	if err := es.start(); err != nil {
		return err
	}
	esURL := "http://" + esAddr + "/mcp"
	if err := waitHTTP(ctx, es, esURL, false); err != nil {
		return err
	}

	data := filepath.Join(b.c.dir, "data-http")
	cfg, err := b.writeConfig("provlog-http", data, fmt.Sprintf("    url: %s\n", strconv.Quote(esURL)))
	if err != nil {
		return err
	}
	plAddr, err := freeAddr()
	if err != nil {
		return err
	}
	pl, err := b.newProc("provlog-http", nil, b.bin, "serve", "--config", cfg, "--http", plAddr)
	if err != nil {
		return err
	}
	if err := pl.start(); err != nil {
		return err
	}
	plBase := "http://" + plAddr
	if err := waitHTTP(ctx, pl, plBase+"/healthz", true); err != nil {
		return err
	}
	tok, err := os.ReadFile(filepath.Join(data, "local.token"))
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(tok))
	ptool := serverID + "__" + b.c.tool
	fail := func(err error) error {
		return fmt.Errorf("%w\nprovlog stderr:\n%s\neverything-server stderr:\n%s", err, pl.logTail(), es.logTail())
	}

	if b.c.phases["http"] {
		b.logf("A2: HTTP latency, %d samples per path (warm-up %d)", b.c.n, b.c.warmup)
		dcs, err := connectHTTP(ctx, esURL, token)
		if err != nil {
			return fail(fmt.Errorf("connecting to everything-server: %w", err))
		}
		pcs, err := connectHTTP(ctx, plBase+"/mcp", token)
		if err != nil {
			dcs.Close()
			return fail(fmt.Errorf("connecting to provlog: %w", err))
		}
		if err := checkTool(ctx, dcs, b.c.tool); err != nil {
			return fail(err)
		}
		if err := checkTool(ctx, pcs, ptool); err != nil {
			return fail(fmt.Errorf("provlog (HTTP): %w", err))
		}
		size0, err := healthSize(plBase)
		if err != nil {
			return fail(err)
		}
		r, err := b.measureLatency(ctx, target{cs: dcs, tool: b.c.tool}, target{cs: pcs, tool: ptool, wantReceipt: true})
		dcs.Close()
		pcs.Close()
		if err != nil {
			return fail(err)
		}
		size1, err := healthSize(plBase)
		if err != nil {
			return fail(err)
		}
		r.entries = size1 - size0
		if calls := int64(len(r.proxied) + b.c.warmup); r.entries < calls {
			return fail(fmt.Errorf("the log grew by %d entries for %d acknowledged proxied calls", r.entries, calls))
		}
		b.res.http = r
	}

	if b.c.phases["tput"] {
		r, err := b.runThroughput(ctx, esURL, plBase, token, ptool, map[string]int{"client": 0, "provlog": pl.pid(), "everything": es.pid()})
		if err != nil {
			return fail(err)
		}
		b.res.tput = r
	}
	if b.res.rssHTTP, err = vmHWM(pl.pid()); err != nil {
		return fmt.Errorf("reading provlog's VmHWM: %w", err)
	}
	b.collectProfile(pl)
	pl.stop()
	es.stop()
	return nil
}

// loadRun keeps n closed-loop workers calling op until stopped, counting
// successful ops, and records op latencies while measuring is set.
type loadRun struct {
	ops       atomic.Int64
	measuring atomic.Bool
	stop      atomic.Bool
	wg        sync.WaitGroup
	mu        sync.Mutex
	lat       []time.Duration
	err       error
}

// op is one worker's next operation; it returns how many ops it completed
// (calls it made successfully) before an error.
type op func(ctx context.Context, record func(time.Duration)) error

func startLoad(ctx context.Context, ops []op) *loadRun {
	l := &loadRun{}
	for _, o := range ops {
		l.wg.Go(func() {
			var lat []time.Duration
			record := func(d time.Duration) {
				l.ops.Add(1)
				if l.measuring.Load() {
					lat = append(lat, d)
				}
			}
			for !l.stop.Load() {
				if err := o(ctx, record); err != nil {
					l.mu.Lock()
					if l.err == nil {
						l.err = err
					}
					l.mu.Unlock()
					l.stop.Store(true)
				}
			}
			l.mu.Lock()
			l.lat = append(l.lat, lat...)
			l.mu.Unlock()
		})
	}
	return l
}

// measure ramps, then counts ops over one window, then stops the workers
// (letting in-flight ops finish) and returns the window.
//
// watchPort, if not 0, is a local TCP port whose closed connections are
// counted: sockets in TIME_WAIT with it at either end that appeared during
// the window (TIME_WAIT lasts 60 s on Linux, longer than a window).
//
// metricsBase, if not "", is a provlog whose sequencer counters are read.
func (l *loadRun) measure(ctx context.Context, ramp, d time.Duration, pids map[string]int, watchPort int, metricsBase string) (window, error) {
	sleep(ctx, ramp)
	seq0 := scrapeSeq(metricsBase)
	cpu0 := map[string]time.Duration{}
	for name, pid := range pids {
		cpu0[name] = cpuTime(pid)
	}
	tw0 := timeWait(watchPort)
	l.measuring.Store(true)
	n0, t0 := l.ops.Load(), time.Now()
	sleep(ctx, d)
	n1, t1 := l.ops.Load(), time.Now()
	l.measuring.Store(false)
	w := window{calls: n1 - n0, elapsed: t1.Sub(t0), cpu: map[string]time.Duration{}}
	for name, pid := range pids {
		w.cpu[name] = cpuTime(pid) - cpu0[name]
	}
	for k := range timeWait(watchPort) {
		if !tw0[k] {
			w.closed++
		}
	}
	w.seq = scrapeSeq(metricsBase).sub(seq0)
	l.stop.Store(true)
	l.wg.Wait()
	w.lat = l.lat
	if l.err != nil {
		return w, l.err
	}
	return w, ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (b *bench) runThroughput(ctx context.Context, esURL, plBase, token, ptool string, pids map[string]int) (*tputResult, error) {
	b.logf("A3: HTTP throughput, %d sessions per path, %d × %v windows per path", b.c.clients, b.c.rounds, b.c.window)
	var direct, proxied []target
	defer func() {
		for _, t := range append(direct, proxied...) {
			t.cs.Close()
		}
	}()
	for range b.c.clients {
		dcs, err := connectHTTP(ctx, esURL, token)
		if err != nil {
			return nil, fmt.Errorf("connecting to everything-server: %w", err)
		}
		direct = append(direct, target{cs: dcs, tool: b.c.tool})
		pcs, err := connectHTTP(ctx, plBase+"/mcp", token)
		if err != nil {
			return nil, fmt.Errorf("connecting to provlog: %w", err)
		}
		proxied = append(proxied, target{cs: pcs, tool: ptool, wantReceipt: true})
	}
	size0, err := healthSize(plBase)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(esURL)
	if err != nil {
		return nil, err
	}
	esPort, _ := strconv.Atoi(u.Port())
	r := &tputResult{}
	warmed := map[bool]bool{}
	// D P P D D P P D …: each path gets as many early as late windows.
	for i := range 2 * b.c.rounds {
		prox := i%4 == 1 || i%4 == 2
		ts := direct
		if prox {
			ts = proxied
		}
		ops := make([]op, len(ts))
		for j, t := range ts {
			ops[j] = func(ctx context.Context, record func(time.Duration)) error {
				start := time.Now()
				if err := t.call(ctx); err != nil {
					return err
				}
				record(time.Since(start))
				return nil
			}
		}
		ramp := b.c.ramp
		if !warmed[prox] {
			ramp *= 2
			warmed[prox] = true
		}
		l := startLoad(ctx, ops)
		mb := ""
		if prox {
			mb = plBase
		}
		w, err := l.measure(ctx, ramp, b.c.window, pids, esPort, mb)
		if prox {
			r.calls += l.ops.Load()
		}
		if err != nil {
			return nil, err
		}
		w.proxied = prox
		r.windows = append(r.windows, w)
		b.logf("A3 window %d (%s): %.0f calls/s", i+1, pathName(prox), w.rate())
	}
	size1, err := healthSize(plBase)
	if err != nil {
		return nil, err
	}
	r.entries = size1 - size0
	if r.entries < r.calls {
		return nil, fmt.Errorf("the log grew by %d entries for %d acknowledged proxied calls", r.entries, r.calls)
	}
	return r, nil
}

func pathName(proxied bool) string {
	if proxied {
		return "via provlog"
	}
	return "direct"
}

// ---- B: task tools ----

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
		cs, err := connectHTTP(ctx, base+"/mcp", token)
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

// ---- output ----

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1 // nearest rank
	i = max(0, min(i, len(s)-1))
	return s[i]
}

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 0 && v > -10, v >= 0 && v < 10:
		return fmt.Sprintf("%.2f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

func signedMs(d time.Duration) string {
	if d >= 0 {
		return "+" + ms(d)
	}
	return ms(d)
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	out = append([]string{s}, out...)
	r := strings.Join(out, ",")
	if neg {
		r = "-" + r
	}
	return r
}

func rate(v float64) string { return group(int64(v + 0.5)) }

// meanRate is the rate over all of a path's windows together.
func meanRate(ws []window, proxied bool) (float64, []string) {
	var calls int64
	var el time.Duration
	var each []string
	for _, w := range ws {
		if w.proxied == proxied {
			calls += w.calls
			el += w.elapsed
			each = append(each, rate(w.rate()))
		}
	}
	if el == 0 {
		return 0, nil
	}
	return float64(calls) / el.Seconds(), each
}

func windowsLat(ws []window, proxied bool) []time.Duration {
	var all []time.Duration
	for _, w := range ws {
		if w.proxied == proxied {
			all = append(all, w.lat...)
		}
	}
	return all
}

// cpuPerCall is the CPU time of one process per call over a path's windows.
func cpuPerCall(ws []window, proxied bool, name string) string {
	var cpu time.Duration
	var calls int64
	for _, w := range ws {
		if w.proxied == proxied {
			cpu += w.cpu[name]
			calls += w.calls
		}
	}
	if calls == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f µs", float64(cpu)/float64(calls)/1e3)
}

// cpuPerCallSum is the CPU time of the named processes together per call
// over a path's windows.
func cpuPerCallSum(ws []window, proxied bool, names ...string) time.Duration {
	var cpu time.Duration
	var calls int64
	for _, w := range ws {
		if w.proxied == proxied {
			for _, n := range names {
				cpu += w.cpu[n]
			}
			calls += w.calls
		}
	}
	if calls == 0 {
		return 0
	}
	return cpu / time.Duration(calls)
}

func us(d time.Duration) string { return fmt.Sprintf("%s µs", group(d.Microseconds())) }

func closedPerCall(ws []window, proxied bool) string {
	var closed, calls int64
	for _, w := range ws {
		if w.proxied == proxied {
			closed += int64(w.closed)
			calls += w.calls
		}
	}
	if calls == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", float64(closed)/float64(calls))
}

// commitStats describes the sequencer's group commits over windows.
func commitStats(ws []window, proxied bool) string {
	var s seqStats
	for _, w := range ws {
		if w.proxied == proxied {
			s.appends += w.seq.appends
			s.commits += w.seq.commits
			s.commitSeconds += w.seq.commitSeconds
		}
	}
	if s.commits == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f entries/commit, %.2f ms/commit", s.appends/s.commits, 1e3*s.commitSeconds/s.commits)
}

func cpuShare(ws []window, proxied bool, name string) string {
	var cpu, el time.Duration
	for _, w := range ws {
		if w.proxied == proxied {
			cpu += w.cpu[name]
			el += w.elapsed
		}
	}
	if el == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", cpu.Seconds()/el.Seconds())
}

func mib(v float64) string { return fmt.Sprintf("%.1f MiB", v) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (b *bench) print(w io.Writer, date time.Time, load, fsync [2]string, took time.Duration) {
	c := b.c
	r := b.res
	mode := "full"
	if c.quick {
		mode = "quick"
	}
	goVersion := runtime.Version()
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		goVersion = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(w, "# proxybench: provlog's MCP proxy and task tools\n\n")
	fmt.Fprintf(w, "- date: %s\n", date.Format(time.RFC3339))
	fmt.Fprintf(w, "- Go: %s (toolchain building provlog), %s %s/%s (proxybench); nproc %d, GOMAXPROCS %d\n",
		goVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "- CPU: %s\n", cpuModel())
	fmt.Fprintf(w, "- load average (1/5/15 min) at start: %s; at end: %s (other work on the machine shares its cores and disk)\n", load[0], load[1])
	fmt.Fprintf(w, "- fsync probe in the work dir (200 × 4 KiB append + fdatasync, %s) at start: %s; at end: %s\n", filesystemOf(c.dir), fsync[0], fsync[1])
	fmt.Fprintf(w, "- mode: %s; latency %d samples per path in alternating blocks of %d after %d warm-up calls; throughput %d sessions per path, %d × %v windows per path (order D P P D …, %v ramp each, 2× for the first); tasks %d sessions, %d × %v windows\n",
		mode, c.n, c.block, c.warmup, c.clients, c.rounds, c.window, c.ramp, c.taskClients, c.taskRounds, c.taskWindow)
	fmt.Fprintf(w, "- provlog: %s; downstream: go-sdk v1.8.0 conformance everything-server (%s), tool %s; client: go-sdk v1.8.0 mcp.Client, protocol %s\n",
		b.buildN, c.everything, c.tool, protocolVersion)
	if c.profDir != "" {
		fmt.Fprintf(w, "- profiling hook (CPU, and heap at the end) on in every provlog process (profiles in %s)\n", c.profDir)
	}
	fmt.Fprintln(w)

	if r.stdio != nil || r.http != nil || r.tput != nil {
		fmt.Fprintf(w, "## A. Proxy overhead (Issue 3)\n\n")
		fmt.Fprintf(w, "| metric | direct | via provlog | added |\n| --- | --- | --- | --- |\n")
		for _, lr := range []struct {
			name string
			r    *latencyResult
			path string
		}{
			{"A1. latency per call, stdio, 1 client", r.stdio, "client → everything-server stdio; via: client → provlog stdio → everything-server stdio"},
			{"A2. latency per call, HTTP, 1 client", r.http, "client → everything-server HTTP; via: client → provlog /mcp → everything-server HTTP"},
		} {
			if lr.r == nil {
				continue
			}
			for _, p := range []float64{50, 99} {
				d, v := pct(lr.r.direct, p), pct(lr.r.proxied, p)
				fmt.Fprintf(w, "| %s: p%.0f | %s | %s | **%s** |\n", lr.name, p, ms(d), ms(v), signedMs(v-d))
			}
		}
		if t := r.tput; t != nil {
			dr, deach := meanRate(t.windows, false)
			pr, peach := meanRate(t.windows, true)
			ratio := 0.0
			if dr > 0 {
				ratio = pr / dr
			}
			fmt.Fprintf(w, "| A3. throughput, %d HTTP sessions (closed loop) | %s calls/s (windows: %s) | %s calls/s (windows: %s) | ratio **%.0f%%** |\n",
				c.clients, rate(dr), strings.Join(deach, ", "), rate(pr), strings.Join(peach, ", "), 100*ratio)
			dl, pl := windowsLat(t.windows, false), windowsLat(t.windows, true)
			fmt.Fprintf(w, "| A3. latency per call at %d sessions: p50 / p99 | %s / %s | %s / %s | %s / %s |\n",
				c.clients, ms(pct(dl, 50)), ms(pct(dl, 99)), ms(pct(pl, 50)), ms(pct(pl, 99)),
				signedMs(pct(pl, 50)-pct(dl, 50)), signedMs(pct(pl, 99)-pct(dl, 99)))
			fmt.Fprintf(w, "| A3. CPU per call: client / provlog / everything-server | %s / — / %s | %s / %s / %s | |\n",
				cpuPerCall(t.windows, false, "client"), cpuPerCall(t.windows, false, "everything"),
				cpuPerCall(t.windows, true, "client"), cpuPerCall(t.windows, true, "provlog"), cpuPerCall(t.windows, true, "everything"))
			dc, pc := cpuPerCallSum(t.windows, false, "client", "everything"), cpuPerCallSum(t.windows, true, "client", "provlog", "everything")
			if pc > 0 {
				fmt.Fprintf(w, "| A3. CPU per call, all processes together (the ratio is what a CPU-bound machine allows) | %s | %s | ratio %.0f%% |\n",
					us(dc), us(pc), 100*float64(dc)/float64(pc))
			}
			fmt.Fprintf(w, "| A3. log group commits | | %s | |\n", commitStats(t.windows, true))
			fmt.Fprintf(w, "| A3. TCP connections to everything-server closed per call (new TIME_WAIT sockets) | %s | %s | |\n",
				closedPerCall(t.windows, false), closedPerCall(t.windows, true))
			fmt.Fprintf(w, "| A3. cores busy: client / provlog / everything-server | %s / — / %s | %s / %s / %s | |\n",
				cpuShare(t.windows, false, "client"), cpuShare(t.windows, false, "everything"),
				cpuShare(t.windows, true, "client"), cpuShare(t.windows, true, "provlog"), cpuShare(t.windows, true, "everything"))
		}
		var rss []string
		if r.stdio != nil {
			rss = append(rss, "stdio (A1): "+mib(r.rssStdio))
		}
		if r.http != nil || r.tput != nil {
			rss = append(rss, "HTTP (A2+A3): "+mib(r.rssHTTP))
		}
		fmt.Fprintf(w, "| A4. sidecar peak RSS (VmHWM of the provlog process) | | %s | |\n", strings.Join(rss, "; "))
		fmt.Fprintln(w)
		var checks []string
		if r.http != nil {
			checks = append(checks, fmt.Sprintf("A2: %s proxied calls, %s log entries", group(int64(len(r.http.proxied)+c.warmup)), group(r.http.entries)))
		}
		if r.tput != nil {
			checks = append(checks, fmt.Sprintf("A3: %s proxied calls, %s log entries", group(r.tput.calls), group(r.tput.entries)))
		}
		fmt.Fprintf(w, "Every proxied call returned a receipt (durably logged before it was answered)")
		if len(checks) > 0 {
			fmt.Fprintf(w, "; %s", strings.Join(checks, "; "))
		}
		fmt.Fprintf(w, ".\n\n")
	}

	if t := r.tasks; t != nil {
		tr, each := meanRate(t.windows, false)
		lat := windowsLat(t.windows, false)
		fmt.Fprintf(w, "## B. Task tools (Issue 4)\n\n")
		fmt.Fprintf(w, "| metric | provlog serve --data D --http ADDR (no downstreams) |\n| --- | --- |\n")
		fmt.Fprintf(w, "| B1. task ops/s, %d HTTP sessions, distinct tasks (create_task → accept_task → report_completion) | **%s ops/s** (windows: %s) |\n",
			c.taskClients, rate(tr), strings.Join(each, ", "))
		fmt.Fprintf(w, "| B2. latency per op: p50 / p99 | %s / %s |\n", ms(pct(lat, 50)), ms(pct(lat, 99)))
		fmt.Fprintf(w, "| B3. CPU per op: client / provlog; cores busy: client / provlog | %s / %s; %s / %s |\n",
			cpuPerCall(t.windows, false, "client"), cpuPerCall(t.windows, false, "provlog"),
			cpuShare(t.windows, false, "client"), cpuShare(t.windows, false, "provlog"))
		if both := cpuPerCallSum(t.windows, false, "client", "provlog"); both > 0 {
			fmt.Fprintf(w, "| B3b. ceiling if client and provlog had all %d cores: %d / (client + provlog CPU per op) | %s ops/s |\n",
				runtime.NumCPU(), runtime.NumCPU(), rate(float64(runtime.NumCPU())/both.Seconds()))
		}
		fmt.Fprintf(w, "| B4. log group commits | %s |\n", commitStats(t.windows, false))
		fmt.Fprintf(w, "| B5. sidecar peak RSS (VmHWM) | %s |\n", mib(t.rss))
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Every op returned a receipt; %s ops in all (%s create, %s accept, %s report), %s log entries.\n\n",
			group(t.ops), group(t.byTool[0]), group(t.byTool[1]), group(t.byTool[2]), group(t.entries))
	}

	fmt.Fprintf(w, "## Against the targets\n\n| target | result | met? |\n| --- | --- | --- |\n")
	for _, lr := range []struct {
		name string
		r    *latencyResult
	}{{"stdio", r.stdio}, {"HTTP", r.http}} {
		if lr.r == nil {
			continue
		}
		for _, x := range []struct {
			p      float64
			target time.Duration
		}{{50, c.targetP50}, {99, c.targetP99}} {
			added := pct(lr.r.proxied, x.p) - pct(lr.r.direct, x.p)
			if x.target > 0 {
				fmt.Fprintf(w, "| Issue 3: added p%.0f latency ≤ %v, %s, 1 client | %s | %s |\n", x.p, x.target, lr.name, signedMs(added), yesNo(added <= x.target))
			} else {
				fmt.Fprintf(w, "| Issue 3: added p%.0f latency, %s, 1 client | %s | not judged (-target-added-p%.0f) |\n", x.p, lr.name, signedMs(added), x.p)
			}
		}
	}
	if t := r.tput; t != nil {
		dr, _ := meanRate(t.windows, false)
		pr, _ := meanRate(t.windows, true)
		ratio := pr / dr
		fmt.Fprintf(w, "| Issue 3: proxied ≥ %.0f%% of direct throughput, %d HTTP sessions | %.0f%% (%s vs %s calls/s) | %s |\n",
			100*c.minRatio, c.clients, 100*ratio, rate(pr), rate(dr), yesNo(ratio >= c.minRatio))
	}
	if r.stdio != nil || r.http != nil || r.tput != nil {
		peak := max(r.rssStdio, r.rssHTTP)
		fmt.Fprintf(w, "| Issue 3: sidecar peak RSS ≤ %.0f MiB | %s | %s |\n", c.maxRSSMiB, mib(peak), yesNo(peak <= c.maxRSSMiB))
	}
	if t := r.tasks; t != nil {
		fmt.Fprintf(w, "| (for reference) Issue 3's RSS bound applied to B's sidecar (task tools, %s entries written) | %s | %s |\n",
			group(t.entries), mib(t.rss), yesNo(t.rss <= c.maxRSSMiB))
		tr, _ := meanRate(t.windows, false)
		fmt.Fprintf(w, "| Issue 4: ≥ %s task ops/s, %d HTTP sessions | %s ops/s | %s |\n", rate(c.minTaskOps), c.taskClients, rate(tr), yesNo(tr >= c.minTaskOps))
	}
	fmt.Fprintln(w)
	if len(r.profiles) > 0 {
		fmt.Fprintf(w, "profiles: %s\n\n", strings.Join(r.profiles, ", "))
	}
	fmt.Fprintf(w, "total wall time %s\n", took.Round(time.Second))
}

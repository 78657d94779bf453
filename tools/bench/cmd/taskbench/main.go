// Command taskbench measures the task engine (opp) on a large log: a
// sequencer and an engine over a real store (Pebble in a temp dir, or
// PostgreSQL), as provlog serve wires them, driven in process. It creates
// -tasks tasks, accepts and reports completion on -accepted of them, then
// reads get_task_status of random tasks and saves the task index (as
// provlog serve does at shutdown); then, in fresh processes, it opens the
// same log again, once replaying it all ("reopen") and once from the
// saved index ("resume"), and reads again. It prints one
// Markdown table: append rates, status latency, Open time and RSS (VmHWM:
// the peak of the process; VmRSS: at the end).
//
// Each phase runs in a child process (the program re-executes itself with
// -phase), so each one's RSS is its own.
//
// Usage:
//
//	go run ./cmd/taskbench [-tasks 1000000] [-accepted 100000] [-store postgres://…]
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
)

const origin = "taskbench.example/log"

type config struct {
	dir, store, phase string
	tasks, accepted   int
	workers, samples  int
	cache             int64
	profile           string
	memprofile        string
	trace             string
	profilePhase      string
}

// result is what one phase reports to the parent, as JSON on stdout.
type result struct {
	Phase       string
	Entries     uint64
	CreateRate  float64 // task.create appends/s
	ClaimRate   float64 // accept+claim appends/s
	OpenSeconds float64
	SaveSeconds float64 // SaveIndex at the end of build
	StatusP50   float64 // ms
	StatusP99   float64 // ms
	HotP50      float64 // ms, the same 100 tasks again and again
	HotP99      float64
	// Where the random and the hot statuses' time went (steps.go), and
	// what they waited for besides their own work (waits.go).
	RandomSplit, HotSplit string
	RandomWaits, HotWaits string
	ListMS                float64 // one list_unaccepted_tasks
	HWM, RSS              int64   // KiB
	HeapInuseMiB          float64
	LiveHeapMiB           float64 // after a GC at the end
	GoHeldMiB             float64 // heap and stacks the Go runtime holds from the OS
	// RSS at the end by kind of mapping (/proc/self/smaps): anonymous
	// memory beyond what the Go runtime holds (the task index and the
	// upper tree levels, which live outside the Go heap, and C
	// allocations: Pebble's cache and memtables when built with cgo), and
	// files (the program's own text).
	OutsideGoMiB, FileMiB float64
	// The same split at the peak, as a sampler saw it (every 200 ms):
	// RssAnon, RssFile, what the Go runtime held then, and the entries
	// in the log.
	PeakAnonMiB, PeakFileMiB, PeakGoHeldMiB float64
	PeakEntries                             uint64
}

func main() {
	var c config
	flag.StringVar(&c.dir, "dir", "", "work dir (default: a new temp dir, removed after)")
	flag.StringVar(&c.store, "store", "", "PostgreSQL URL of an empty database (default: Pebble in the work dir)")
	flag.StringVar(&c.phase, "phase", "", "(internal) run one phase: build, reopen or resume")
	flag.IntVar(&c.tasks, "tasks", 1_000_000, "tasks to create")
	flag.IntVar(&c.accepted, "accepted", 100_000, "tasks to accept and report completion on")
	flag.IntVar(&c.workers, "workers", 64, "concurrent callers")
	flag.IntVar(&c.samples, "samples", 20_000, "get_task_status samples per phase")
	flag.Int64Var(&c.cache, "cache", 0, "opp.Options.CacheBytes (0: the default)")
	flag.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the -profile-phase phase to this file")
	flag.StringVar(&c.memprofile, "memprofile", "", "write a heap profile at the end of the -profile-phase phase to this file")
	flag.StringVar(&c.trace, "trace", "", "write a Go execution trace of the -profile-phase phase's reads (get_task_status, list) to this file")
	flag.StringVar(&c.profilePhase, "profile-phase", "reopen", "the phase -cpuprofile, -memprofile and -trace are taken of")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "taskbench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.phase != "" {
		r, err := phase(context.Background(), c)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "taskbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		c.dir = d
	}
	var rs []result
	for _, p := range []string{"build", "reopen", "resume"} {
		args := []string{"-phase", p, "-dir", c.dir, "-store", c.store, "-tasks", strconv.Itoa(c.tasks), "-accepted", strconv.Itoa(c.accepted),
			"-workers", strconv.Itoa(c.workers), "-samples", strconv.Itoa(c.samples), "-cache", strconv.FormatInt(c.cache, 10), "-cpuprofile", c.profile, "-memprofile", c.memprofile,
			"-trace", c.trace, "-profile-phase", c.profilePhase}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("phase %s: %w", p, err)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("phase %s: %w", p, err)
		}
		rs = append(rs, r)
	}
	report(c, rs)
	return nil
}

func report(c config, rs []result) {
	store := "pebble"
	if c.store != "" {
		store = "postgres"
	}
	fmt.Printf("taskbench: store %s, %d tasks created, %d accepted and completed, %d workers, %d cores, %s\n\n",
		store, c.tasks, c.accepted, c.workers, runtime.NumCPU(), runtime.Version())
	fmt.Println("| phase | entries | create/s | accept+claim/s | Open | status p50 | status p99 | status p50, 100 hot tasks | list_unaccepted | peak RSS (VmHWM) | RSS at end | Go heap in use | Go heap live | Go runtime holds | RSS at end outside Go (index, tree levels, C) / files | at the peak: anon / files / Go runtime holds (entries) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		rate := func(v float64) string {
			if v == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f", v)
		}
		open := fmt.Sprintf("%.2f s", r.OpenSeconds)
		if r.Phase == "build" {
			open = fmt.Sprintf("— (SaveIndex %.2f s)", r.SaveSeconds)
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %.3f ms | %.3f ms | %.3f ms | %.1f ms | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f / %.1f MiB | %.1f / %.1f / %.1f MiB (%d) |\n",
			r.Phase, r.Entries, rate(r.CreateRate), rate(r.ClaimRate), open, r.StatusP50, r.StatusP99, r.HotP50, r.ListMS,
			float64(r.HWM)/1024, float64(r.RSS)/1024, r.HeapInuseMiB, r.LiveHeapMiB, r.GoHeldMiB, r.OutsideGoMiB, r.FileMiB,
			r.PeakAnonMiB, r.PeakFileMiB, r.PeakGoHeldMiB, r.PeakEntries)
	}
	fmt.Println()
	for _, r := range rs {
		fmt.Printf("%s, random statuses: %s; %s\n%s, hot statuses: %s; %s\n", r.Phase, r.RandomSplit, r.RandomWaits, r.Phase, r.HotSplit, r.HotWaits)
	}
}

// benchLog is the log as the task engine sees it (as cmd/provlog wires it),
// timing the engine's reads of it (steps.go).
type benchLog struct {
	*server.Sequencer
	log.Storage
	steps *steps
}

func (l benchLog) Append(ctx context.Context, e []byte) (*log.Receipt, error) {
	return l.Sequencer.Append(ctx, e)
}

func (l benchLog) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	defer l.steps.time(&l.steps.entries, time.Now())
	return l.Storage.Entries(ctx, start, end)
}

func (l benchLog) LatestSize(ctx context.Context) (uint64, error) {
	defer l.steps.time(&l.steps.latest, time.Now())
	if sh, ok := l.Storage.(log.SharedStorage); ok {
		st, err := sh.Latest(ctx)
		return st.Size, err
	}
	n, _ := l.Sequencer.Checkpoint()
	return n, nil
}

func phase(ctx context.Context, c config) (*result, error) {
	signer, verifier, err := keys(c.dir)
	if err != nil {
		return nil, err
	}
	var store log.Storage
	if c.store != "" {
		store, err = logpg.Open(ctx, c.store, nil)
	} else {
		store, err = logpebble.Open(filepath.Join(c.dir, "db"), nil)
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()
	seq, err := server.OpenSequencer(ctx, store, signer, verifier, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), origin, "vkey", []byte{1}, "taskbench") },
	})
	if err != nil {
		return nil, err
	}
	defer seq.Close()
	l := benchLog{seq, store, &steps{}}
	size, _ := seq.Checkpoint()
	stop := samplePeak(seq)
	if c.profile != "" && c.phase == c.profilePhase {
		f, err := os.Create(c.profile)
		if err != nil {
			return nil, err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	opts := &opp.Options{CacheBytes: c.cache, Rand: &idSource{}}
	if c.phase != "reopen" {
		opts.IndexFile = filepath.Join(c.dir, "tasks.idx")
	}
	e, err := opp.Open(ctx, l, size, opts)
	if err != nil {
		return nil, err
	}
	r := &result{Phase: c.phase, OpenSeconds: time.Since(t0).Seconds()}
	if from, err := e.Resumed(); c.phase == "resume" && (err != nil || from != size) {
		return nil, fmt.Errorf("resume: the saved index covered %d of %d entries: %v", from, size, err)
	}
	if c.phase == "build" {
		if err := build(ctx, c, e, r); err != nil {
			return nil, err
		}
	}
	if err := measureReads(ctx, c, e, l, r); err != nil {
		return nil, err
	}
	r.Entries, _ = seq.Checkpoint()
	if c.phase == "build" { // save the index, as provlog serve does at shutdown
		t0 := time.Now()
		if err := e.SaveIndex(ctx, r.Entries); err != nil {
			return nil, err
		}
		r.SaveSeconds = time.Since(t0).Seconds()
	}
	p := stop()
	r.PeakAnonMiB, r.PeakFileMiB, r.PeakGoHeldMiB, r.PeakEntries = p.anon, p.file, p.goHeld, p.entries
	r.HWM, r.RSS, err = rss()
	anon, file := smaps()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInuseMiB = float64(ms.HeapInuse) / (1 << 20)
	r.GoHeldMiB = goHeld(&ms)
	r.OutsideGoMiB, r.FileMiB = anon-r.GoHeldMiB, file
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.LiveHeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	runtime.KeepAlive(e)
	if c.memprofile != "" && c.phase == c.profilePhase {
		f, err := os.Create(c.memprofile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			return nil, err
		}
	}
	return r, err
}

// idSource hands the engine task ids: the k-th id read is taskID(k), so
// the benchmark can name any task without holding a million ids itself.
type idSource struct {
	mu sync.Mutex
	n  uint64
}

func (s *idSource) Read(p []byte) (int, error) {
	if len(p) != 16 {
		return 0, fmt.Errorf("idSource: read of %d bytes, want 16", len(p))
	}
	s.mu.Lock()
	k := s.n
	s.n++
	s.mu.Unlock()
	b := idBytes(k)
	return copy(p, b[:]), nil
}

func idBytes(k uint64) [16]byte {
	var seed [8]byte
	binary.BigEndian.PutUint64(seed[:], k)
	h := sha256.Sum256(seed[:])
	return [16]byte(h[:16])
}

func taskID(k int) string {
	b := idBytes(uint64(k))
	return "t_" + hex.EncodeToString(b[:])
}

// build creates the tasks, then accepts and completes c.accepted of them.
func build(ctx context.Context, c config, e *opp.Engine, r *result) error {
	rate, err := parallel(c.workers, c.tasks, func(w, i int) error {
		_, err := e.Create(ctx, "creator", opp.CreateArgs{Title: "task " + strconv.Itoa(i), Description: "created by taskbench"})
		return err
	})
	if err != nil {
		return err
	}
	r.CreateRate = rate
	fmt.Fprintf(os.Stderr, "taskbench: %d tasks created, %.0f/s\n", c.tasks, rate)
	rate, err = parallel(c.workers, c.accepted, func(w, i int) error {
		actor := "agent-" + strconv.Itoa(w)
		id := taskID(i * (c.tasks / c.accepted)) // spread over the log
		if _, err := e.Accept(ctx, actor, id); err != nil {
			return err
		}
		_, err := e.ReportCompletion(ctx, actor, opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "done", Evidence: []uint64{0}})
		return err
	})
	if err != nil {
		return err
	}
	r.ClaimRate = 2 * rate
	fmt.Fprintf(os.Stderr, "taskbench: %d tasks accepted and completed, %.0f appends/s\n", c.accepted, 2*rate)
	return nil
}

// parallel runs fn(worker, i) for i in [0, n) on workers goroutines and
// returns calls per second.
func parallel(workers, n int, fn func(w, i int) error) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	t0 := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(w, i); err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(t0).Seconds(), first
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// measureReads times get_task_status on random tasks (mostly not in the
// cache), on 100 hot ones, and one list_unaccepted_tasks; each status is
// split into its reads of the log and the rest (steps.go), and each loop
// is told what its calls waited for (waits.go).
func measureReads(ctx context.Context, c config, e *opp.Engine, l benchLog, r *result) error {
	if c.trace != "" && c.phase == c.profilePhase {
		f, err := os.Create(c.trace)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	rnd := mrand.New(mrand.NewPCG(1, uint64(len(r.Phase))))
	loop := func(id func(k int) string) ([]time.Duration, string, string, error) {
		lat, ss := make([]time.Duration, 0, c.samples), make([]split, 0, c.samples)
		w0, err := sampleWaits(ctx, c.store)
		if err != nil {
			return nil, "", "", err
		}
		l.steps.on.Store(true)
		defer l.steps.on.Store(false)
		l.steps.take(0)
		reads0 := l.steps.reads.Load()
		for k := range c.samples {
			id := id(k)
			t0 := time.Now()
			if _, err := e.Status(ctx, id); err != nil {
				return nil, "", "", fmt.Errorf("status of %s: %w", id, err)
			}
			lat = append(lat, time.Since(t0))
			ss = append(ss, l.steps.take(lat[k]))
		}
		split := describeSplits(ss, l.steps.reads.Load()-reads0)
		w1, err := sampleWaits(ctx, c.store)
		return lat, split, describeWaits(w0, w1, c.samples), err
	}
	lat, split, w, err := loop(func(int) string { return taskID(rnd.IntN(c.tasks)) })
	if err != nil {
		return err
	}
	r.StatusP50, r.StatusP99, r.RandomSplit, r.RandomWaits = pct(lat, 50), pct(lat, 99), split, w
	lat, split, w, err = loop(func(k int) string { return taskID(k % 100) })
	if err != nil {
		return err
	}
	r.HotP50, r.HotP99, r.HotSplit, r.HotWaits = pct(lat, 50), pct(lat, 99), split, w
	t0 := time.Now()
	list, total, err := e.ListUnaccepted(ctx, 500)
	if err != nil {
		return err
	}
	r.ListMS = float64(time.Since(t0).Microseconds()) / 1000
	if want := c.tasks - c.accepted; total != want || len(list) != min(500, want) {
		return fmt.Errorf("list_unaccepted_tasks: %d listed of %d, want %d of %d", len(list), total, min(500, want), want)
	}
	return nil
}

func pct(d []time.Duration, p int) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100].Microseconds()) / 1000
}

// keys makes the log's key in dir on first use and reads it after.
func keys(dir string) (note.Signer, note.Verifier, error) {
	path := filepath.Join(dir, "key")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		skey, vkey, err := note.GenerateKey(rand.Reader, origin)
		if err != nil {
			return nil, nil, err
		}
		b = []byte(skey + "\n" + vkey)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, nil, err
		}
	} else if err != nil {
		return nil, nil, err
	}
	skey, vkey, _ := strings.Cut(string(b), "\n")
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, nil, err
	}
	v, err := note.NewVerifier(vkey)
	return s, v, err
}

// goHeld is the heap and stacks the Go runtime holds from the OS, in MiB.
func goHeld(ms *runtime.MemStats) float64 {
	return float64(ms.HeapSys-ms.HeapReleased+ms.StackSys) / (1 << 20)
}

// peak is the RSS split at the highest RSS a sampler saw.
type peak struct {
	rss, anon, file, goHeld float64
	entries                 uint64
}

// samplePeak reads the RSS every 200 ms until the returned function is
// called, and returns the split at the highest one.
func samplePeak(seq *server.Sequencer) func() peak {
	var mu sync.Mutex
	var p peak
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			anon, file := rollup()
			if anon+file <= p.rss {
				continue
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			n, _ := seq.Checkpoint()
			mu.Lock()
			p = peak{rss: anon + file, anon: anon, file: file, goHeld: goHeld(&ms), entries: n}
			mu.Unlock()
		}
	}()
	return func() peak {
		close(done)
		wg.Wait()
		return p
	}
}

// rollup returns RssAnon and RssFile (shared memory counted with files)
// from /proc/self/status, in MiB.
func rollup() (anon, file float64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "RssAnon":
			anon = kb / 1024
		case "RssFile", "RssShmem":
			file += kb / 1024
		}
	}
	return anon, file
}

// smaps splits the process's resident memory into anonymous mappings and
// files, in MiB.
func smaps() (anon, file float64) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, 0
	}
	kind := &anon
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping's header: range perms offset dev inode [path]
			kind = &anon
			if len(f) >= 6 && strings.HasPrefix(f[5], "/") {
				kind = &file
			}
			continue
		}
		if f[0] == "Rss:" && len(f) >= 2 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			*kind += kb / 1024
		}
	}
	return anon, file
}

// rss returns the process's VmHWM and VmRSS in KiB.
func rss() (hwm, cur int64, err error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			hwm = n
		case "VmRSS":
			cur = n
		}
	}
	return hwm, cur, sc.Err()
}

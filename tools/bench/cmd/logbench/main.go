// Command logbench runs provlog's transparency log (the logpebble store
// behind a server.Sequencer) and Tessera v1.0.4's POSIX driver side by side
// on the same disk, with the same 1 KiB entries, the same Ed25519 note
// signer and fsync-before-acknowledge durability on both, and prints one
// Markdown table: durable append throughput, append-to-receipt latency,
// verified inclusion proofs per second on a large log, bytes on disk per
// entry and peak RSS.
//
// Every measurement runs in a child process (the program re-executes
// itself with -phase), so each implementation's peak RSS is its own and no
// phase inherits another's caches or goroutines. Every run is bounded in
// count and time; -quick is a smoke test of about a minute.
//
// Usage:
//
//	go run ./cmd/logbench [-quick] [-dir DIR] [flags]
//
// See tools/bench/README.md for what each row means and the fairness notes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

// keyName is the origin of both logs' checkpoints.
const keyName = "logbench.example/log"

type config struct {
	dir          string
	quick        bool
	keep         bool
	profile      string
	memTrace     bool
	n, n1        int
	appenders    []int
	maxTime      time.Duration
	lat1, lat64  int
	tlat1        int
	tlat64       int
	latMaxTime   time.Duration
	proofN       int
	proofs       int
	proofWorkers int
	buildC       int
	buildMaxTime time.Duration
	proofMaxTime time.Duration
	verifyN      int
	tess         tesseraConfig
	altAge       time.Duration
	pg           string // DSN: add the PostgreSQL columns (pg.go)
	pgRTT        time.Duration
	rounds       int // -rounds: throughput rows only, interleaved (rounds.go)
	latRounds    int // -latency-rounds: receipt latency at 1 appender only, interleaved (rounds.go)
}

func newFlagSet(name string) *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "logbench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("logbench")
	fs.SetOutput(stderr)
	var c config
	var appenders, phase string
	fs.StringVar(&c.dir, "dir", os.TempDir(), "directory under which both logs are created (same disk for both)")
	fs.BoolVar(&c.quick, "quick", false, "smoke-test sizes (about a minute); explicit flags still win")
	fs.BoolVar(&c.keep, "keep", false, "keep the log directories")
	fs.IntVar(&c.n, "n", 100000, "entries per throughput run with more than one appender")
	fs.IntVar(&c.n1, "n1", 5000, "entries per throughput run with one appender (fsync-bound)")
	fs.StringVar(&appenders, "appenders", "1,16,64,256", "concurrent appenders for the throughput rows")
	fs.DurationVar(&c.maxTime, "max-time", 20*time.Second, "time cap per throughput run; the entries done by then are reported")
	fs.IntVar(&c.lat1, "lat1", 2000, "provlog latency samples at 1 appender")
	fs.IntVar(&c.lat64, "lat64", 20000, "provlog latency samples at 64 appenders")
	fs.IntVar(&c.tlat1, "tlat1", 200, "Tessera latency samples at 1 appender (each takes ≥ the batch age)")
	fs.IntVar(&c.tlat64, "tlat64", 2000, "Tessera latency samples at 64 appenders")
	fs.DurationVar(&c.latMaxTime, "lat-max-time", 90*time.Second, "time cap per latency run")
	fs.IntVar(&c.proofN, "proof-n", 1000000, "entries in the log that proofs are built from")
	fs.IntVar(&c.proofs, "proofs", 200000, "random inclusion proofs to build and verify")
	fs.IntVar(&c.proofWorkers, "proof-workers", runtime.GOMAXPROCS(0), "goroutines building proofs")
	fs.IntVar(&c.buildC, "build-appenders", 1024, "concurrent appenders building the proof log and the verify log")
	fs.DurationVar(&c.buildMaxTime, "build-max-time", 6*time.Minute, "time cap for building the proof log (failing if not done)")
	fs.DurationVar(&c.proofMaxTime, "proof-max-time", 60*time.Second, "time cap for the proofs")
	fs.IntVar(&c.verifyN, "verify-n", 10000, "entries in the root cross-check run")
	fs.UintVar(&c.tess.BatchSize, "tessera-batch-size", 256, "Tessera WithBatching max size")
	fs.DurationVar(&c.tess.BatchAge, "tessera-batch-age", 250*time.Millisecond, "Tessera WithBatching max age (its default)")
	fs.DurationVar(&c.tess.CPInterval, "tessera-checkpoint-interval", 100*time.Millisecond, "Tessera WithCheckpointInterval (100ms is the POSIX driver's minimum)")
	fs.DurationVar(&c.tess.Poll, "tessera-poll", 10*time.Millisecond, "Tessera PublicationAwaiter poll period")
	fs.DurationVar(&c.altAge, "tessera-alt-batch-age", 10*time.Millisecond, "also run the throughput and latency rows with this Tessera batch age (0: skip)")
	fs.StringVar(&c.profile, "cpuprofile-dir", "", "write each child's CPU profile to this directory")
	fs.BoolVar(&c.memTrace, "memtrace", false, "children print their RSS and Go heap to stderr every second")
	fs.StringVar(&c.pg, "postgres", "", "also run provlog on PostgreSQL (logpg), one sidecar and two, on the database at this DSN (each run in its own schema)")
	fs.DurationVar(&c.pgRTT, "postgres-rtt", 0, "with -postgres, also run two sidecars (with -latency-rounds, one and two) through a loopback proxy adding this round trip to the database (0: skip)")
	fs.IntVar(&c.rounds, "rounds", 0, "with -postgres: run only the throughput rows (-appenders), Pebble and PostgreSQL with one sidecar and two, this many interleaved rounds, and print each round and the medians")
	fs.IntVar(&c.latRounds, "latency-rounds", 0, "with -postgres: run only the receipt latency at 1 appender (-lat1 samples), Pebble and PostgreSQL with one sidecar and two, this many interleaved rounds, with where PostgreSQL's time goes")
	fs.StringVar(&phase, "phase", "", "internal: run one measurement as a child process")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: logbench [flags]\n")
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "phase" {
				return
			}
			fmt.Fprintf(fs.Output(), "  -%s (default %q)\n    \t%s\n", f.Name, f.DefValue, f.Usage)
		})
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if phase != "" {
		return runChild(phase)
	}
	if c.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]string{
			"n": "2000", "n1": "300", "max-time": "3s",
			"lat1": "300", "lat64": "2000", "tlat1": "8", "tlat64": "256", "lat-max-time": "20s",
			"proof-n": "20000", "proofs": "20000", "build-appenders": "256",
			"build-max-time": "2m", "proof-max-time": "10s", "verify-n": "2000",
		}
		for k, v := range quick {
			if !set[k] {
				if err := fs.Set(k, v); err != nil {
					return err
				}
			}
		}
	}
	for a := range strings.SplitSeq(appenders, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil || v < 1 {
			return fmt.Errorf("-appenders: bad count %q", a)
		}
		c.appenders = append(c.appenders, v)
	}
	if c.proofWorkers < 1 {
		return fmt.Errorf("-proof-workers must be at least 1")
	}
	return orchestrate(c, stdout, stderr)
}

// runner starts child phases.
type runner struct {
	c          config
	base       string
	skey, vkey string
	exe        string
	stderr     io.Writer
	seq        int
}

func (r *runner) run(phase, impl string, s spec, timeout time.Duration) (result, error) {
	r.seq++
	s.Phase, s.Impl = phase, impl
	s.Postgres, s.PostgresRTT = r.c.pg, r.c.pgRTT
	s.Dir = filepath.Join(r.base, fmt.Sprintf("%02d-%s-%s", r.seq, phase, impl))
	s.SKey, s.VKey = r.skey, r.vkey
	s.MemTrace = r.c.memTrace
	if r.c.profile != "" {
		if err := os.MkdirAll(r.c.profile, 0o755); err != nil {
			return result{}, err
		}
		s.CPUProfile, _ = filepath.Abs(filepath.Join(r.c.profile, fmt.Sprintf("%02d-%s-%s-%d.pprof", r.seq, phase, impl, s.Appenders)))
	}
	js, err := json.Marshal(s)
	if err != nil {
		return result{}, err
	}
	fmt.Fprintf(r.stderr, "logbench: %-10s %-8s appenders=%-4d n=%-7d ... ", phase, impl, s.Appenders, s.N)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.exe, "-phase="+phase)
	cmd.Env = append(os.Environ(), specEnv+"="+string(js))
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = r.stderr
	t0 := time.Now()
	err = cmd.Run()
	if !r.c.keep {
		os.RemoveAll(s.Dir)
	}
	if err != nil {
		fmt.Fprintln(r.stderr, "FAILED")
		return result{}, fmt.Errorf("%s %s: %w (stdout: %s)", phase, impl, err, strings.TrimSpace(out.String()))
	}
	var res result
	found := false
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if b, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			if err := json.Unmarshal([]byte(b), &res); err != nil {
				return result{}, fmt.Errorf("%s %s: bad result: %w", phase, impl, err)
			}
			found = true
		}
	}
	if !found {
		return result{}, fmt.Errorf("%s %s: child printed no result", phase, impl)
	}
	fmt.Fprintf(r.stderr, "done in %.1fs\n", time.Since(t0).Seconds())
	return res, nil
}

func orchestrate(c config, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, keyName)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	base, err := os.MkdirTemp(c.dir, "logbench-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(base)
	}
	r := &runner{c: c, base: base, skey: skey, vkey: vkey, exe: exe, stderr: stderr}
	if c.latRounds > 0 {
		if c.pg == "" {
			return fmt.Errorf("-latency-rounds needs -postgres")
		}
		return r.runLatencyRounds(stdout, c.latRounds)
	}
	if c.rounds > 0 {
		if c.pg == "" {
			return fmt.Errorf("-rounds needs -postgres")
		}
		return r.runRounds(stdout, c.rounds)
	}
	begin := time.Now()
	loadStart := host.LoadAvg()
	probe := func() string {
		p50, p99, err := fsyncProbe(base, 200)
		if err != nil {
			return "failed: " + err.Error()
		}
		return fmt.Sprintf("p50 %s, p99 %s", ms(p50), ms(p99))
	}
	fsyncStart := probe()

	tessCfgs := []tesseraConfig{c.tess}
	if c.altAge > 0 && c.altAge != c.tess.BatchAge {
		alt := c.tess
		alt.BatchAge = c.altAge
		tessCfgs = append(tessCfgs, alt)
	}
	rtt := c.pgRTT
	if c.pg == "" {
		rtt = 0
	}
	tb := newTable(tessCfgs, c.pg != "", rtt)
	slack := 3 * time.Minute

	if err := r.throughputRows(tb, tessCfgs, slack); err != nil {
		return err
	}
	if err := r.latencyRows(tb, tessCfgs, slack); err != nil {
		return err
	}
	if err := r.bigLogRows(tb, tessCfgs, slack); err != nil {
		return err
	}

	// Cross-check: each log's root equals a recomputation over its own entries.
	vs := spec{Appenders: 64, N: c.verifyN, MaxTime: c.buildMaxTime, Tessera: c.tess}
	vOurs, err := r.run(phaseVerify, implProvlog, vs, c.buildMaxTime+slack)
	if err != nil {
		return err
	}
	vTess, err := r.run(phaseVerify, implTessera, vs, c.buildMaxTime+slack)
	if err != nil {
		return err
	}
	if c.pg != "" {
		vPG, err := r.run(phaseVerify, implPG2, vs, c.buildMaxTime+slack)
		if err != nil {
			return err
		}
		if !vPG.RootsOK {
			return fmt.Errorf("PostgreSQL roots NOT verified")
		}
	}

	printHeader(stdout, c, tessCfgs)
	fmt.Fprintf(stdout, "- load average (1/5/15 min) at start: %s; at end: %s (other work on the machine adds noise, above all to fsync)\n", loadStart, host.LoadAvg())
	fmt.Fprintf(stdout, "- fsync probe in -dir (200 × 4 KiB append + fdatasync) at start: %s; at end: %s\n", fsyncStart, probe())
	fmt.Fprintln(stdout)
	tb.write(stdout)
	fmt.Fprintln(stdout)
	if vOurs.RootsOK && vTess.RootsOK {
		fmt.Fprintf(stdout, "roots verified: after %s entries appended by 64 concurrent appenders, each log's published, signature-checked checkpoint root equals an RFC 6962 compact-range recomputation over that log's own entries in index order (provlog %s…, Tessera %s…), and every appended entry is present exactly once at the index its append was told.\n",
			group(int64(c.verifyN)), vOurs.Root[:16], vTess.Root[:16])
	} else {
		return fmt.Errorf("roots NOT verified")
	}
	fmt.Fprintf(stdout, "\ntotal wall time %s\n", time.Since(begin).Round(time.Second))
	return nil
}

// throughputRows runs and adds rows 1, durable append throughput for each -appenders.
func (r *runner) throughputRows(tb *table, tessCfgs []tesseraConfig, slack time.Duration) error {
	c := r.c
	// 1. Durable append throughput.
	for _, a := range c.appenders {
		n := c.n
		if a == 1 {
			n = c.n1
		}
		s := spec{Appenders: a, N: n, MaxTime: c.maxTime}
		ours, err := r.run(phaseThroughput, implProvlog, s, c.maxTime+slack)
		if err != nil {
			return err
		}
		row := []string{cellOursThroughput(ours, n, c.maxTime)}
		for _, tc := range tessCfgs {
			s.Tessera = tc
			t, err := r.run(phaseThroughput, implTessera, s, c.maxTime+slack)
			if err != nil {
				return err
			}
			row = append(row, cellTessThroughput(t, n, c.maxTime))
		}
		s.Tessera = tesseraConfig{}
		pc, err := r.pgCells(phaseThroughput, s, c.maxTime+slack, true, func(res result) string { return cellOursThroughput(res, n, c.maxTime) })
		if err != nil {
			return err
		}
		row = append(row, pc...)
		tb.add(fmt.Sprintf("1. durable append throughput, %d appender%s", a, plural(a)), row...)
	}
	return nil
}

// latencyRows runs and adds rows 2, the latency from append to signed checkpoint and inclusion proof.
func (r *runner) latencyRows(tb *table, tessCfgs []tesseraConfig, slack time.Duration) error {
	c := r.c
	// 2. Latency from append to signed checkpoint + inclusion proof.
	for _, l := range []struct{ a, ours, tess int }{{1, c.lat1, c.tlat1}, {64, c.lat64, c.tlat64}} {
		s := spec{Appenders: l.a, N: l.ours, MaxTime: c.latMaxTime}
		ours, err := r.run(phaseLatency, implProvlog, s, c.latMaxTime+slack)
		if err != nil {
			return err
		}
		row := []string{cellLatency(ours)}
		for _, tc := range tessCfgs {
			s := spec{Appenders: l.a, N: l.tess, MaxTime: c.latMaxTime, Tessera: tc}
			t, err := r.run(phaseLatency, implTessera, s, c.latMaxTime+slack)
			if err != nil {
				return err
			}
			row = append(row, cellLatency(t))
		}
		pc, err := r.pgCells(phaseLatency, s, c.latMaxTime+slack, true, cellLatency)
		if err != nil {
			return err
		}
		row = append(row, pc...)
		tb.add(fmt.Sprintf("2. latency append → signed checkpoint + inclusion proof, %d appender%s", l.a, plural(l.a)), row...)
	}
	return nil
}

// bigLogRows runs and adds rows 3 and 4 on one big log: inclusion proofs, disk, RSS and the build.
func (r *runner) bigLogRows(tb *table, tessCfgs []tesseraConfig, slack time.Duration) error {
	c := r.c
	// 3 + 4. The big log: build, disk, RSS, proofs.
	ps := spec{Appenders: c.buildC, N: c.proofN, MaxTime: c.buildMaxTime, Proofs: c.proofs, ProofWorkers: c.proofWorkers, ProofMaxTime: c.proofMaxTime, Tessera: c.tess}
	pOurs, err := r.run(phaseProofs, implProvlog, ps, c.buildMaxTime+c.proofMaxTime+slack)
	if err != nil {
		return err
	}
	pTess, err := r.run(phaseProofs, implTessera, ps, c.buildMaxTime+c.proofMaxTime+slack)
	if err != nil {
		return err
	}
	var pPG result
	if c.pg != "" {
		if pPG, err = r.run(phaseProofs, implPG, ps, c.buildMaxTime+c.proofMaxTime+slack); err != nil {
			return err
		}
	}
	na := func(cells ...string) []string {
		for len(cells) < len(tessCfgs)+1 {
			cells = append(cells, "(same as left)")
		}
		return cells
	}
	withPG := func(cells []string, pg func(result) string) []string {
		if c.pg == "" {
			return cells
		}
		cells = append(cells, pg(pPG), "(one log: see 1 sidecar)")
		if c.pgRTT > 0 {
			cells = append(cells, "(one log: see 1 sidecar)")
		}
		return cells
	}
	tb.add(fmt.Sprintf("3. verified inclusion proofs/s, random indices, %s-entry log, %d goroutines", group(int64(c.proofN)), c.proofWorkers),
		withPG(na(cellProofs(pOurs), cellProofs(pTess)), cellProofs)...)
	tb.add(fmt.Sprintf("4a. bytes on disk per entry right after the %s-entry build (%d B entries)", group(int64(c.proofN)), EntrySize),
		withPG(na(cellDisk(pOurs, "Pebble WAL"), cellDisk(pTess, "partial tiles/bundles awaiting GC")), cellDiskPG)...)
	tb.add("4b. peak RSS (VmHWM of the child): build / build + proofs",
		withPG(na(cellRSS(pOurs), cellRSS(pTess)), func(r result) string { return cellRSS(r) + " (the sidecar; PostgreSQL's own not counted)" })...)
	tb.add(fmt.Sprintf("(setup) %s-entry build with %d appenders, until published", group(int64(c.proofN)), c.buildC),
		withPG(na(cellBuild(pOurs), cellBuild(pTess)), cellBuild)...)
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func printHeader(w io.Writer, c config, tcs []tesseraConfig) {
	fmt.Fprintf(w, "# logbench: provlog (logpebble + Sequencer) vs Tessera POSIX\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- Go: %s %s/%s, GOMAXPROCS %d, nproc %d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(w, "- CPU: %s\n", host.CPUModel())
	abs, _ := filepath.Abs(c.dir)
	fmt.Fprintf(w, "- dir: %s on %s\n", abs, filesystemOf(c.dir))
	fmt.Fprintf(w, "- modules: %s\n", depVersions())
	mode := "full"
	if c.quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "- mode: %s; entries %d B; one Ed25519 note signer (x/mod note, key name %q) for both\n", mode, EntrySize, keyName)
	fmt.Fprintf(w, "- provlog: logpebble.Open(dir, nil) + server.OpenSequencer (group commit, Pebble Sync commit per batch, checkpoint signed per batch)\n")
	for i, tc := range tcs {
		fmt.Fprintf(w, "- Tessera config %c: posix.New + %s, no antispam\n", 'A'+i, tc)
	}
	if c.pg != "" {
		fmt.Fprintf(w, "- provlog on PostgreSQL: logpg.Open + server.OpenSequencer per sidecar, each run in a fresh schema; 2 sidecars = two processes, each with its own store, pool and sequencer committing under the log's row lock, in the throughput rows each sidecar with half the appenders in its own process, in the latency rows the appenders round robin over both (those of the second over a Unix socket); PostgreSQL on the same machine (loopback, fsync on)\n")
	}
}

func depVersions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	want := map[string]bool{
		"github.com/transparency-dev/tessera": true, "github.com/cockroachdb/pebble/v2": true,
		"github.com/transparency-dev/merkle": true, "golang.org/x/mod": true,
	}
	var out []string
	for _, d := range bi.Deps {
		if want[d.Path] {
			out = append(out, d.Path+" "+d.Version)
		}
	}
	return strings.Join(out, ", ")
}

// table is the Markdown result table: one row per metric, one column per
// implementation (and Tessera configuration).
type table struct {
	head []string
	rows [][]string
}

func newTable(tcs []tesseraConfig, pg bool, rtt time.Duration) *table {
	h := []string{"metric", "provlog"}
	for i, tc := range tcs {
		h = append(h, fmt.Sprintf("Tessera %c (batch %d/%v, checkpoint %v)", 'A'+i, tc.BatchSize, tc.BatchAge, tc.CPInterval))
	}
	if pg {
		h = append(h, "provlog on PostgreSQL, 1 sidecar", "provlog on PostgreSQL, 2 sidecars")
	}
	if rtt > 0 {
		h = append(h, fmt.Sprintf("provlog on PostgreSQL, 2 sidecars, +%v round trip", rtt))
	}
	return &table{head: h}
}

// pgCells runs a phase on PostgreSQL with one sidecar and with two (only
// one if two is false) and formats the results; nothing without -postgres.
func (r *runner) pgCells(phase string, s spec, timeout time.Duration, two bool, cell func(result) string) ([]string, error) {
	if r.c.pg == "" {
		return nil, nil
	}
	var out []string
	impls := []string{implPG, implPG2}
	if r.c.pgRTT > 0 {
		impls = append(impls, implPG2RTT)
	}
	for _, impl := range impls {
		if impl != implPG && !two {
			out = append(out, "(one log: see 1 sidecar)")
			continue
		}
		res, err := r.run(phase, impl, s, timeout)
		if err != nil {
			return nil, err
		}
		out = append(out, cell(res))
	}
	return out, nil
}

func (t *table) add(metric string, cells ...string) {
	t.rows = append(t.rows, append([]string{metric}, cells...))
}

func (t *table) write(w io.Writer) {
	line := func(cells []string) {
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
}

func capped(res result, n int, maxTime time.Duration) string {
	if res.Count < n {
		return fmt.Sprintf("N=%s of %s: %v cap", group(int64(res.Count)), group(int64(n)), maxTime)
	}
	return "N=" + group(int64(res.Count))
}

func cellOursThroughput(r result, n int, maxTime time.Duration) string {
	return fmt.Sprintf("**%s/s** published (%s, %.2f s; %s)", rate(r.Count, r.Elapsed), capped(r, n, maxTime), r.Elapsed.Seconds(), r.Diagnostics)
}

func cellTessThroughput(r result, n int, maxTime time.Duration) string {
	return fmt.Sprintf("durable index %s/s; **published %s/s** (%s, %.2f s)", rate(r.Count, r.Elapsed), rate(r.Count, r.Published), capped(r, n, maxTime), r.Published.Seconds())
}

func cellLatency(r result) string {
	d := ""
	if r.Diagnostics != "" {
		d = "; " + r.Diagnostics
	}
	return fmt.Sprintf("p50 **%s**, p99 **%s** (%s samples%s)", ms(r.P50), ms(r.P99), group(int64(r.Count)), d)
}

func cellProofs(r result) string {
	cell := fmt.Sprintf("**%s/s** (%s verified in %.2f s", rate(r.Proofs, r.ProofTime), group(int64(r.Proofs)), r.ProofTime.Seconds())
	if r.ProofCPU > 0 && r.Proofs > 0 {
		// What a proof costs, whatever the load: CPU per proof, harness
		// (entry, leaf hash, verification) included, and what that makes
		// on the cores the proofs could use.
		per := r.ProofCPU / time.Duration(r.Proofs)
		cell += fmt.Sprintf("; %.1f µs CPU per proof, harness included: %s/s per idle core", float64(per.Nanoseconds())/1e3, rate(r.Proofs, r.ProofCPU))
	}
	return cell + ")"
}

func cellDisk(r result, transient string) string {
	n := int64(r.Count)
	return fmt.Sprintf("**%s B** (%s: %s B; allocated %s B; %s in %s files)", group(r.DiskBytes/n), transient, group(r.DiskTrans/n), group(r.DiskAlloc/n), mib(r.DiskBytes), group(int64(r.Files)))
}

func cellDiskPG(r result) string {
	return fmt.Sprintf("**%s B** (tables, indexes and TOAST; %s; WAL not counted)", group(r.DiskBytes/int64(r.Count)), mib(r.DiskBytes))
}

func cellRSS(r result) string {
	return fmt.Sprintf("%s / **%s**", mib(r.RSSBuild), mib(r.RSSPeak))
}

func cellBuild(r result) string {
	return fmt.Sprintf("%s/s (%.1f s)", rate(r.Count, r.Published), r.Published.Seconds())
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"k8s.io/klog/v2"

	"github.com/provlog/provlog/log"
)

// Implementation names.
const (
	implProvlog = "provlog"
	implTessera = "tessera"
)

// Phase names; each runs in its own child process.
const (
	phaseThroughput = "throughput"
	phaseLatency    = "latency"
	phaseProofs     = "proofs" // build the big log, measure disk and RSS, then prove
	phaseVerify     = "verify" // build a small log and recompute its root from its entries
)

// specEnv carries a phase's spec from the parent to the child.
const specEnv = "LOGBENCH_SPEC"

// resultPrefix starts the one stdout line a child answers with.
const resultPrefix = "LOGBENCH_RESULT "

// spec is what a child phase is asked to do.
type spec struct {
	Phase     string
	Impl      string
	Dir       string // the log's directory, created by the child, removed by the parent
	SKey      string
	VKey      string
	Appenders int
	N         int
	MaxTime   time.Duration
	Tessera   tesseraConfig
	// Postgres is the DSN of the database the postgres impls use.
	Postgres    string
	PostgresRTT time.Duration // the round trip implPG2RTT adds
	// CPUProfile, if set, is where the child writes its CPU profile.
	CPUProfile string
	// MemTrace makes the child print its RSS and Go heap to stderr every second.
	MemTrace bool
	// proofs phase
	Proofs       int
	ProofWorkers int
	ProofMaxTime time.Duration
}

// result is what a child phase reports.
type result struct {
	Count       int           // entries appended (or samples taken)
	Elapsed     time.Duration // until every add returned (provlog: published; Tessera: durable index)
	Published   time.Duration // until a published checkpoint covered every entry
	P50, P99    float64       // ms
	Proofs      int
	ProofTime   time.Duration
	ProofCPU    time.Duration // CPU time of the whole process while proving
	DiskBytes   int64         // apparent
	DiskAlloc   int64         // allocated blocks
	DiskTrans   int64         // provlog: Pebble WAL; Tessera: partial tiles and bundles not yet garbage-collected
	Files       int
	RSSBuild    int64 // VmHWM after building (proofs phase)
	RSSPeak     int64 // VmHWM at the end
	RootsOK     bool
	Root        string
	FinalSize   uint64
	Diagnostics string
	Breakdown   string // latency phase on PostgreSQL: where it goes (breakdown.go)
}

func runChild(phase string) error {
	var sp spec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &sp); err != nil {
		return fmt.Errorf("child: bad %s: %w", specEnv, err)
	}
	if sp.Phase != phase {
		return fmt.Errorf("child: -phase=%s but spec is for %s", phase, sp.Phase)
	}
	quietKlog()
	signer, err := note.NewSigner(sp.SKey)
	if err != nil {
		return err
	}
	verifier, err := note.NewVerifier(sp.VKey)
	if err != nil {
		return err
	}
	if phase == phasePeer {
		return runPeer(sp, signer, verifier)
	}
	ctx := context.Background()
	if err := os.MkdirAll(sp.Dir, 0o755); err != nil {
		return err
	}
	var l logImpl
	switch sp.Impl {
	case implProvlog:
		l, err = openProvlog(ctx, sp.Dir, signer, verifier)
	case implTessera:
		l, err = openTessera(ctx, sp.Dir, signer, sp.Tessera)
	case implPG:
		l, err = openPG(ctx, sp.Postgres, 1, 0, signer, verifier, sp)
	case implPG2, implPG2Sock:
		l, err = openPG(ctx, sp.Postgres, 2, 0, signer, verifier, sp)
	case implPG2RTT:
		l, err = openPG(ctx, sp.Postgres, 2, sp.PostgresRTT, signer, verifier, sp)
	case implPGRTT:
		l, err = openPG(ctx, sp.Postgres, 1, sp.PostgresRTT, signer, verifier, sp)
	default:
		err = fmt.Errorf("unknown impl %q", sp.Impl)
	}
	if err != nil {
		return err
	}
	c := &child{sp: sp, l: l, v: verifier, cps: map[string][]byte{}}
	if sp.MemTrace {
		stop := make(chan struct{})
		defer close(stop)
		go memTrace(sp.Phase+" "+sp.Impl, stop)
	}
	if sp.CPUProfile != "" {
		f, err := os.Create(sp.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	var res result
	switch phase {
	case phaseThroughput:
		res, err = c.throughput(ctx)
	case phaseLatency:
		res, err = c.latency(ctx)
	case phaseProofs:
		res, err = c.proofs(ctx)
	case phaseVerify:
		res, err = c.verify(ctx)
	default:
		err = fmt.Errorf("unknown phase %q", phase)
	}
	res.Diagnostics = l.diagnostics()
	if cerr := l.close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("closing: %w", cerr)
	}
	if err != nil {
		return err
	}
	if res.RSSPeak == 0 {
		res.RSSPeak = peakRSS()
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Printf("%s%s\n", resultPrefix, b)
	return nil
}

// quietKlog keeps Tessera's klog INFO lines (e.g. "PublicationAwaiter
// exiting") off stderr; warnings and errors still show.
func quietKlog() {
	fs := newFlagSet("klog")
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "WARNING")
	klog.SetOutput(io.Discard)
}

type child struct {
	sp spec
	l  logImpl
	v  note.Verifier

	mu  sync.Mutex
	cps map[string][]byte // verified checkpoint note -> root
}

// openCheckpoint verifies a signed checkpoint (once per distinct note) and
// returns its size and root.
func (c *child) openCheckpoint(cp []byte) (uint64, []byte, error) {
	c.mu.Lock()
	root, ok := c.cps[string(cp)]
	c.mu.Unlock()
	if ok {
		ck, err := log.ParseCheckpointNote(cp)
		return ck.Size, root, err
	}
	ck, _, err := log.OpenCheckpoint(cp, c.v)
	if err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	c.cps[string(cp)] = ck.Hash
	c.mu.Unlock()
	return ck.Size, ck.Hash, nil
}

func (c *child) deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// throughput: closed-loop appenders, each waiting for its acknowledgement
// before the next append.
func (c *child) throughput(ctx context.Context) (result, error) {
	start := time.Now()
	loop := func() (int, time.Duration, error) {
		return runLoop(c.sp.Appenders, c.sp.N, c.deadline(c.sp.MaxTime), func(seq uint64) error {
			_, err := c.l.add(ctx, makeEntry(seq))
			return err
		})
	}
	if pg, ok := c.l.(*pgImpl); ok && c.sp.Impl == implPG2 && c.sp.Appenders > 1 {
		loop = func() (int, time.Duration, error) { return pg.splitLoop(ctx, c.sp) }
	}
	n, el, err := loop()
	if err != nil {
		return result{}, err
	}
	cp, err := c.l.published(ctx, uint64(n))
	if err != nil {
		return result{}, fmt.Errorf("waiting for publication: %w", err)
	}
	pub := time.Since(start)
	size, _, err := c.openCheckpoint(cp)
	if err != nil {
		return result{}, err
	}
	if size < uint64(n) {
		return result{}, fmt.Errorf("published checkpoint size %d < %d appended", size, n)
	}
	if c.sp.Impl != implTessera {
		pub = el // every Append returned a receipt with a published checkpoint
	}
	return result{Count: n, Elapsed: el, Published: pub, FinalSize: size}, nil
}

// latency: per entry, the time from append to holding a signed checkpoint
// that covers it plus its inclusion proof. Proofs and checkpoints are
// verified off the clock.
func (c *child) latency(ctx context.Context) (result, error) {
	// Warm up: the first appends create files, directories and caches.
	for i := range 2 {
		if _, _, _, err := c.l.addAndProve(ctx, makeEntry(uint64(1<<40+i))); err != nil {
			return result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	var lat latencies
	pg, _ := c.l.(*pgImpl)
	var wal0 walStats
	var cpu0 map[int]time.Duration
	if pg != nil {
		wal0, _ = pg.walStats(ctx)
		cpu0 = cpuWaits()
	}
	var smu sync.Mutex
	var samples []sample
	n, el, err := runLoop(c.sp.Appenders, c.sp.N, c.deadline(c.sp.MaxTime), func(seq uint64) error {
		e := makeEntry(seq)
		s := sample{gc0: gcCount(), t0: time.Now()}
		var idx uint64
		var p [][]byte
		var cp []byte
		var err error
		if pg != nil {
			idx, p, cp, s.local, err = pg.addAndProveVia(ctx, e)
		} else {
			idx, p, cp, err = c.l.addAndProve(ctx, e)
		}
		s.t1 = time.Now()
		s.gc1 = gcCount()
		if err != nil {
			return err
		}
		lat.add(s.t1.Sub(s.t0))
		smu.Lock()
		samples = append(samples, s)
		smu.Unlock()
		size, root, err := c.openCheckpoint(cp)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, size, rfc6962.DefaultHasher.HashLeaf(e), p, root); err != nil {
			return fmt.Errorf("entry %d: inclusion proof: %w", idx, err)
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	p50, p99 := lat.quantiles()
	res := result{Count: n, Elapsed: el, P50: p50, P99: p99}
	if pg != nil {
		cpu1 := cpuWaits()
		pids, perr := pg.runPIDs(ctx)
		wal1, err := pg.walStats(ctx)
		res.Breakdown = breakdown(samples, &pg.commits)
		if err == nil {
			res.Breakdown += "; " + describeWAL(wal0, wal1, n)
		}
		if perr == nil {
			res.Breakdown += "; " + describeCPUWait(cpu0, cpu1, pids, n)
		}
	}
	return res, nil
}

// build appends n entries with many appenders, waits for a published
// checkpoint covering them and returns it with the seq of each index.
func (c *child) build(ctx context.Context, n int) (perm []uint32, size uint64, root []byte, el time.Duration, err error) {
	perm = make([]uint32, n)
	start := time.Now()
	got, _, err := runLoop(c.sp.Appenders, n, c.deadline(c.sp.MaxTime), func(seq uint64) error {
		idx, err := c.l.add(ctx, makeEntry(seq))
		if err != nil {
			return err
		}
		if idx >= uint64(n) {
			return fmt.Errorf("index %d out of range for %d entries", idx, n)
		}
		perm[idx] = uint32(seq)
		return nil
	})
	if err != nil {
		return nil, 0, nil, 0, err
	}
	if got != n {
		return nil, 0, nil, 0, fmt.Errorf("built only %d of %d entries within %v", got, n, c.sp.MaxTime)
	}
	cp, err := c.l.published(ctx, uint64(n))
	if err != nil {
		return nil, 0, nil, 0, err
	}
	el = time.Since(start)
	size, root, err = c.openCheckpoint(cp)
	if err != nil {
		return nil, 0, nil, 0, err
	}
	if size != uint64(n) {
		return nil, 0, nil, 0, fmt.Errorf("published size %d, want %d", size, n)
	}
	return perm, size, root, el, nil
}

// proofs builds the big log, measures its disk use and the peak RSS so far,
// then proves and verifies random indices with ProofWorkers goroutines.
func (c *child) proofs(ctx context.Context) (result, error) {
	perm, size, root, el, err := c.build(ctx, c.sp.N)
	if err != nil {
		return result{}, fmt.Errorf("building: %w", err)
	}
	res := result{Count: int(size), Published: el, FinalSize: size, RSSBuild: peakRSS()}
	transient := func(rel string) bool { return strings.HasSuffix(rel, ".log") } // Pebble WAL
	if c.sp.Impl == implTessera {
		transient = func(rel string) bool { return strings.Contains(rel, ".p/") } // partial tiles and bundles
	}
	if pg, ok := c.l.(*pgImpl); ok {
		if res.DiskBytes, err = pg.diskBytes(ctx); err != nil {
			return result{}, err
		}
		res.DiskAlloc = res.DiskBytes
	} else if res.DiskBytes, res.DiskAlloc, res.DiskTrans, res.Files, err = diskUsage(c.sp.Dir, transient); err != nil {
		return result{}, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	total := 0
	dl := c.deadline(c.sp.ProofMaxTime)
	per := c.sp.Proofs / c.sp.ProofWorkers
	cpu0 := processCPU()
	start := time.Now()
	for w := range c.sp.ProofWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 0x10b))
			prove := c.l.prover(ctx, size)
			done := 0
			var err error
			for ; done < per; done++ {
				if done%64 == 0 && !dl.IsZero() && time.Now().After(dl) {
					break
				}
				i := r.Uint64N(size)
				var p [][]byte
				if p, err = prove(i); err != nil {
					err = fmt.Errorf("proving %d: %w", i, err)
					break
				}
				leaf := rfc6962.DefaultHasher.HashLeaf(makeEntry(uint64(perm[i])))
				if err = proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, leaf, p, root); err != nil {
					err = fmt.Errorf("verifying %d: %w", i, err)
					break
				}
			}
			mu.Lock()
			total += done
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.ProofTime = time.Since(start)
	res.ProofCPU = processCPU() - cpu0
	res.Proofs = total
	if firstErr != nil {
		return result{}, firstErr
	}
	res.RSSPeak = peakRSS()
	return res, nil
}

// verify builds a small log concurrently, then recomputes its root from its
// own entries in index order and compares it with the published, verified
// checkpoint; it also checks that every appended entry is there exactly once.
func (c *child) verify(ctx context.Context) (result, error) {
	perm, size, root, el, err := c.build(ctx, c.sp.N)
	if err != nil {
		return result{}, fmt.Errorf("building: %w", err)
	}
	seen := make([]bool, size)
	got, err := rootOf(ctx, c.l, size, func(i uint64, e []byte) error {
		s, err := entrySeq(e)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if s >= size || seen[s] {
			return fmt.Errorf("entry %d: seq %d out of range or seen twice", i, s)
		}
		seen[s] = true
		if uint32(s) != perm[i] {
			return fmt.Errorf("entry %d holds seq %d, but its append was told index %d for seq %d", i, s, i, perm[i])
		}
		if !bytes.Equal(e, makeEntry(s)) {
			return fmt.Errorf("entry %d: bytes differ from what was appended", i)
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	if !bytes.Equal(got, root) {
		return result{}, fmt.Errorf("root mismatch at size %d: recomputed %x, checkpoint %x", size, got, root)
	}
	return result{Count: int(size), Published: el, RootsOK: true, Root: fmt.Sprintf("%x", root), FinalSize: size}, nil
}

// memTrace prints RSS, peak RSS and the Go heap every second until stop.
func memTrace(name string, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "memtrace %s %4.0fs: RSS %s, peak %s, Go heap in use %s, Go sys %s\n", name, time.Since(start).Seconds(),
			mib(procStatusKB("VmRSS:")*1024), mib(peakRSS()), mib(int64(ms.HeapInuse)), mib(int64(ms.Sys)))
	}
}

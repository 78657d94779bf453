package main

// A2 and A3 over HTTP: the everything-server and provlog as HTTP
// servers, and throughput windows of concurrent clients.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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
	esArgs, esEnv := b.c.httpCommand(esAddr)
	es, err := b.newProc("everything-http", esEnv, esArgs[0], esArgs[1:]...)
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
	stopMem := watchMem(pl.pid())
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
		r, err := b.latencyHTTP(ctx, esURL, plBase, token, ptool)
		if err != nil {
			return fail(err)
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
	b.res.memHTTP = stopMem()
	if b.res.rssHTTP, err = vmHWM(pl.pid()); err != nil {
		return fmt.Errorf("reading provlog's VmHWM: %w", err)
	}
	b.collectProfile(pl)
	pl.stop()
	es.stop()
	return nil
}

// latencyHTTP is A2: one client's calls, timed one at a time, to
// everything-server at esURL directly and through provlog at plBase,
// with the log's growth checked against the calls it acknowledged.
func (b *bench) latencyHTTP(ctx context.Context, esURL, plBase, token, ptool string) (*latencyResult, error) {
	b.logf("A2: HTTP latency, %d samples per path (warm-up %d)", b.c.n, b.c.warmup)
	dcs, err := connectHTTP(ctx, esURL, token, b.c.protocol)
	if err != nil {
		return nil, fmt.Errorf("connecting to everything-server: %w", err)
	}
	pcs, err := connectHTTP(ctx, plBase+"/mcp", token, b.c.protocol)
	if err != nil {
		dcs.Close()
		return nil, fmt.Errorf("connecting to provlog: %w", err)
	}
	if err := checkTool(ctx, dcs, b.c.tool); err != nil {
		return nil, err
	}
	if err := checkTool(ctx, pcs, ptool); err != nil {
		return nil, fmt.Errorf("provlog (HTTP): %w", err)
	}
	size0, err := healthSize(plBase)
	if err != nil {
		return nil, err
	}
	r, err := b.measureLatency(ctx, target{cs: dcs, tool: b.c.tool, args: b.c.args}, target{cs: pcs, tool: ptool, args: b.c.args, wantReceipt: true})
	dcs.Close()
	pcs.Close()
	if err != nil {
		return nil, err
	}
	size1, err := healthSize(plBase)
	if err != nil {
		return nil, err
	}
	r.entries = size1 - size0
	if calls := int64(len(r.proxied) + b.c.warmup); r.entries < calls {
		return nil, fmt.Errorf("the log grew by %d entries for %d acknowledged proxied calls", r.entries, calls)
	}
	return r, nil
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
		dcs, err := connectHTTP(ctx, esURL, token, b.c.protocol)
		if err != nil {
			return nil, fmt.Errorf("connecting to everything-server: %w", err)
		}
		direct = append(direct, target{cs: dcs, tool: b.c.tool, args: b.c.args})
		pcs, err := connectHTTP(ctx, plBase+"/mcp", token, b.c.protocol)
		if err != nil {
			return nil, fmt.Errorf("connecting to provlog: %w", err)
		}
		proxied = append(proxied, target{cs: pcs, tool: ptool, args: b.c.args, wantReceipt: true})
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

package main

// The report: percentiles, rates and the Markdown tables.

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

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

func (b *bench) print(w io.Writer, date time.Time, load [2]string, fsync [2]probe, took time.Duration) {
	r := b.res
	b.printHeader(w, date, load, fsync)
	b.printProxy(w, fsync)
	b.printTasks(w)
	b.printTargets(w)
	fmt.Fprintln(w)
	if len(r.profiles) > 0 {
		fmt.Fprintf(w, "profiles: %s\n\n", strings.Join(r.profiles, ", "))
	}
	fmt.Fprintf(w, "total wall time %s\n", took.Round(time.Second))
}

// printHeader prints the report's title and what it ran on and how.
func (b *bench) printHeader(w io.Writer, date time.Time, load [2]string, fsync [2]probe) {
	c := b.c
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
	fmt.Fprintf(w, "- CPU: %s\n", host.CPUModel())
	fmt.Fprintf(w, "- load average (1/5/15 min) at start: %s; at end: %s (other work on the machine shares its cores and disk)\n", load[0], load[1])
	fmt.Fprintf(w, "- fsync probe in the work dir (200 × 4 KiB append + fdatasync, %s) at start: %s; at end: %s\n", filesystemOf(c.dir), fsync[0].text, fsync[1].text)
	fmt.Fprintf(w, "- mode: %s; latency %d samples per path in alternating blocks of %d after %d warm-up calls; throughput %d sessions per path, %d × %v windows per path (order D P P D …, %v ramp each, 2× for the first); tasks %d sessions, %d × %v windows\n",
		mode, c.n, c.block, c.warmup, c.clients, c.rounds, c.window, c.ramp, c.taskClients, c.taskRounds, c.taskWindow)
	fmt.Fprintf(w, "- provlog: %s; downstream: %s; client: go-sdk v1.8.0 mcp.Client, protocol %s\n",
		b.buildN, c.describeDownstream(), c.protocol)
	if c.profDir != "" {
		fmt.Fprintf(w, "- profiling on in every provlog process (serve --pprof; CPU, and heap at the end; profiles in %s)\n", c.profDir)
	}
	fmt.Fprintln(w)
}

// printProxy prints section A, the proxy's overhead, if it was measured.
func (b *bench) printProxy(w io.Writer, fsync [2]probe) {
	c, r := b.c, b.res
	if r.stdio != nil || r.http != nil || r.tput != nil {
		fmt.Fprintf(w, "## A. Proxy overhead (Issues 3 and 12)\n\n")
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
		if (r.stdio != nil || r.http != nil) && fsync[0].idleP50 > 0 && fsync[1].idleP50 > 0 {
			// A lone call's two commits (the call entry before forwarding,
			// the outcome before answering) each wait for one sync after
			// the machine went idle: the least any added p50 can be here.
			fmt.Fprintf(w, "| A1/A2. two fdatasyncs after %v idle (fsync probe p50 × 2, at start / at end): a lone call's two commits on this disk | | | %s / %s |\n",
				idleGap, ms(2*fsync[0].idleP50), ms(2*fsync[1].idleP50))
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
		if m := r.memHTTP; m.anon > 0 {
			fmt.Fprintf(w, "| A4. HTTP sidecar at its peak anonymous memory: anonymous (heaps, stacks) / file-backed (its executable's pages) | | %s / %s | |\n", mib(m.anon), mib(m.file))
		}
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
}

// printTasks prints section B, the task tools, if they were measured.
func (b *bench) printTasks(w io.Writer) {
	c, r := b.c, b.res
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
}

// printTargets prints the table of results against the issues' targets.
func (b *bench) printTargets(w io.Writer) {
	c, r := b.c, b.res
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
				fmt.Fprintf(w, "| Issue 12: added p%.0f latency ≤ %v, %s, 1 client | %s | %s |\n", x.p, x.target, lr.name, signedMs(added), yesNo(added <= x.target))
			} else {
				fmt.Fprintf(w, "| Issue 12: added p%.0f latency, %s, 1 client | %s | not judged (-target-added-p%.0f) |\n", x.p, lr.name, signedMs(added), x.p)
			}
		}
	}
	if t := r.tput; t != nil {
		dr, _ := meanRate(t.windows, false)
		pr, _ := meanRate(t.windows, true)
		ratio := pr / dr
		fmt.Fprintf(w, "| Issue 12: proxied ≥ %.0f%% of direct throughput, %d HTTP sessions | %.0f%% (%s vs %s calls/s) | %s |\n",
			100*c.minRatio, c.clients, 100*ratio, rate(pr), rate(dr), yesNo(ratio >= c.minRatio))
		if cpu := cpuPerCallSum(t.windows, true, "provlog"); c.maxCPU > 0 && cpu > 0 {
			fmt.Fprintf(w, "| Issue 12: provlog's CPU per call ≤ %v, %d HTTP sessions | %.0f µs | %s |\n",
				c.maxCPU, c.clients, float64(cpu)/1e3, yesNo(cpu <= c.maxCPU))
		}
	}
	if r.stdio != nil || r.http != nil || r.tput != nil {
		peak := max(r.rssStdio, r.rssHTTP)
		fmt.Fprintf(w, "| Issue 12: sidecar peak RSS ≤ %.0f MiB | %s | %s |\n", c.maxRSSMiB, mib(peak), yesNo(peak <= c.maxRSSMiB))
	}
	if t := r.tasks; t != nil {
		fmt.Fprintf(w, "| (for reference) Issue 12's RSS bound applied to B's sidecar (task tools, %s entries written) | %s | %s |\n",
			group(t.entries), mib(t.rss), yesNo(t.rss <= c.maxRSSMiB))
		tr, _ := meanRate(t.windows, false)
		fmt.Fprintf(w, "| Issue 4: ≥ %s task ops/s, %d HTTP sessions | %s ops/s | %s |\n", rate(c.minTaskOps), c.taskClients, rate(tr), yesNo(tr >= c.minTaskOps))
	}
}

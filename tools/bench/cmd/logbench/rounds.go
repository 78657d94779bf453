package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

// runRounds is -rounds: only the throughput rows, Pebble and PostgreSQL
// with one sidecar and two, interleaved round by round (the order turns
// each round) so that every impl meets the same load, with each round's
// rates and the medians. It answers the 64-appender question (two
// sidecars against single-sidecar Pebble) in one run.
func (r *runner) runRounds(w io.Writer, rounds int) error {
	impls := []string{implProvlog, implPG, implPG2, implPG2Sock}
	slack := 3 * time.Minute
	fmt.Fprintf(w, "# logbench -rounds %d: durable append throughput, entries/s (load at start %s)\n\n", rounds, host.LoadAvg())
	fmt.Fprintf(w, "%s: each sidecar's appenders in its own process; %s: all in one, the peer's appends over a Unix socket\n\n", implPG2, implPG2Sock)
	for _, a := range r.c.appenders {
		n := r.c.n
		if a == 1 {
			n = r.c.n1
		}
		rates := map[string][]float64{}
		var ratios, sockRatios []float64
		fmt.Fprintf(w, "## %d appender%s (n=%d, cap %s)\n\n| round | %s | 2 sidecars / Pebble | via socket / Pebble |\n|---|---|---|---|---|---|---|\n", a, plural(a), n, r.c.maxTime, strings.Join(impls, " | "))
		for i := range rounds {
			order := slices.Clone(impls)
			for range i % len(impls) {
				order = append(order[1:], order[0])
			}
			got := map[string]result{}
			for _, impl := range order {
				res, err := r.run(phaseThroughput, impl, spec{Appenders: a, N: n, MaxTime: r.c.maxTime}, r.c.maxTime+slack)
				if err != nil {
					return err
				}
				got[impl] = res
				rates[impl] = append(rates[impl], float64(res.Count)/res.Elapsed.Seconds())
			}
			ratio := rates[implPG2][i] / rates[implProvlog][i]
			sock := rates[implPG2Sock][i] / rates[implProvlog][i]
			ratios, sockRatios = append(ratios, ratio), append(sockRatios, sock)
			fmt.Fprintf(w, "| %d (load %s) |", i+1, host.LoadAvg())
			for _, impl := range impls {
				fmt.Fprintf(w, " %.0f/s (%s) |", rates[impl][i], got[impl].Diagnostics)
			}
			fmt.Fprintf(w, " %.2f | %.2f |\n", ratio, sock)
		}
		fmt.Fprintf(w, "| median |")
		for _, impl := range impls {
			fmt.Fprintf(w, " %.0f/s |", median(rates[impl]))
		}
		fmt.Fprintf(w, " **%.2f** | %.2f |\n\n", median(ratios), median(sockRatios))
	}
	fmt.Fprintf(w, "load at end %s\n", host.LoadAvg())
	return nil
}

// runLatencyRounds is -latency-rounds: only the receipt latency at one
// appender, Pebble and PostgreSQL with one sidecar and two (and, with
// -postgres-rtt, one sidecar and two through the delay proxy), interleaved
// as in runRounds, with each PostgreSQL run's breakdown (breakdown.go).
func (r *runner) runLatencyRounds(w io.Writer, rounds int) error {
	impls := []string{implProvlog, implPG, implPG2}
	if r.c.pgRTT > 0 {
		impls = append(impls, implPGRTT, implPG2RTT)
	}
	slack := 3 * time.Minute
	fmt.Fprintf(w, "# logbench -latency-rounds %d: receipt latency at 1 appender, %d samples a run (load at start %s)\n\n", rounds, r.c.lat1, host.LoadAvg())
	fmt.Fprintf(w, "| round |")
	for _, impl := range impls {
		fmt.Fprintf(w, " %s p50 / p99 |", impl)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(impls)))
	p50s, p99s := map[string][]float64{}, map[string][]float64{}
	var notes []string
	for i := range rounds {
		order := slices.Clone(impls)
		for range i % len(impls) {
			order = append(order[1:], order[0])
		}
		got := map[string]result{}
		for _, impl := range order {
			res, err := r.run(phaseLatency, impl, spec{Appenders: 1, N: r.c.lat1, MaxTime: r.c.latMaxTime}, r.c.latMaxTime+slack)
			if err != nil {
				return err
			}
			got[impl] = res
			p50s[impl], p99s[impl] = append(p50s[impl], res.P50), append(p99s[impl], res.P99)
			if res.Breakdown != "" {
				notes = append(notes, fmt.Sprintf("- round %d, %s (load %s): %s", i+1, impl, host.LoadAvg(), res.Breakdown))
			}
		}
		fmt.Fprintf(w, "| %d |", i+1)
		for _, impl := range impls {
			fmt.Fprintf(w, " %.2f / %.1f ms |", got[impl].P50, got[impl].P99)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| median |")
	for _, impl := range impls {
		fmt.Fprintf(w, " %.2f / %.1f ms |", median(p50s[impl]), median(p99s[impl]))
	}
	if r.c.pgRTT > 0 {
		m, err := measuredRTT(context.Background(), r.c.pg, r.c.pgRTT)
		if err != nil {
			return err
		}
		notes = append(notes, "- "+m)
	}
	fmt.Fprintf(w, "\n\n%s\n\nload at end %s\n", strings.Join(notes, "\n"), host.LoadAvg())
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

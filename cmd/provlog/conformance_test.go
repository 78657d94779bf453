package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// installed with node 22 by tools/mcptest/install.sh) against go-sdk's
// conformance everything-server, once directly and once through provlog
// with the same server as its only downstream (prefix ""), over stdio and
// over HTTP. provlog promises that the agent's tools work exactly as
// without it: a scenario that passes directly and fails through provlog
// fails this test. Scenarios that fail directly too (today the tasks-*
// extension of 2026-07-28) are reported, not counted.
//
// knownOnlyThroughProvlog lists the scenarios that still fail only
// through provlog, by revision and route: work to do, not accepted
// behaviour. The test fails when a scenario not listed here fails only
// through provlog, and also when a listed one passes (so the list only
// shrinks).
var knownOnlyThroughProvlog = map[string][]string{}

// The suite sends no Authorization header, so the runs through provlog go
// through a small reverse proxy that adds the local actor's bearer token
// and keeps every other header, Host included (the suite's DNS rebinding
// scenario sends a foreign Host and expects provlog to refuse it).
//
// That proxy's requests are full duplex (EnableFullDuplex): provlog may
// answer, and a 2026-07-28 subscriptions/listen stream does, before the
// proxy's transport has finished with the request body it is copying
// from the suite. A half-duplex net/http server closes that body at the
// first flush of the answer; the transport's last read of it then fails,
// and the transport closes its connection to provlog, which cut the listen
// stream a millisecond after its acknowledgement ("use of closed network
// connection") and lost server-stateless a list_changed check in about 1
// run in 6 under load.

// conformanceTools returns the node 22 binary and the suite's CLI, or
// skips (fails under CI=true) when they are not installed.
func conformanceTools(t *testing.T) (node, cli, everything string) {
	t.Helper()
	var missing []string
	get := func(env string) string {
		v := os.Getenv(env)
		if v == "" {
			missing = append(missing, env)
		} else if _, err := os.Stat(v); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", env, err))
		}
		return v
	}
	node, cli, everything = get("PROVLOG_NODE22"), get("PROVLOG_CONFORMANCE"), get("PROVLOG_EVERYTHING_SERVER")
	if len(missing) > 0 {
		msg := fmt.Sprintf("missing %s; run: eval \"$(bash tools/mcptest/install.sh)\"", strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, cli, everything
}

// A scenarioResult is one scenario's line of the suite's summary.
type scenarioResult struct {
	passed, failed int
	failures       []string // the failed checks' ids and errors
}

var summaryLine = regexp.MustCompile(`^[✓✗] (\S+): (\d+) passed, (\d+) failed`)

// singleLine is the result line of a run of one scenario.
var singleLine = regexp.MustCompile(`^Passed: (\d+)/\d+, (\d+) failed`)

// runConformance runs the suite against url for one spec revision and
// returns its results by scenario.
func runConformance(t *testing.T, node, cli, url, revision string, only ...string) map[string]scenarioResult {
	t.Helper()
	out := t.TempDir()
	if d := os.Getenv("PROVLOG_CONFORMANCE_KEEP"); d != "" {
		out, _ = os.MkdirTemp(d, "run-")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{cli, "server", "--url", url, "--requirements", revision, "-o", out}
	if len(only) == 1 { // the suite runs one scenario of a revision this way
		args = []string{cli, "server", "--url", url, "--spec-version", revision, "--scenario", only[0], "-o", out}
	}
	cmd := exec.CommandContext(ctx, node, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run() // exits 1 when any scenario fails, which the comparison judges
	res := map[string]scenarioResult{}
	inSummary := false
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "=== SUMMARY ===") {
			inSummary = true
		}
		if m := singleLine.FindStringSubmatch(line); m != nil && len(only) == 1 {
			p, _ := strconv.Atoi(m[1])
			f, _ := strconv.Atoi(m[2])
			res[only[0]] = scenarioResult{passed: p, failed: f}
		}
		m := summaryLine.FindStringSubmatch(line)
		if !inSummary || m == nil {
			continue
		}
		p, _ := strconv.Atoi(m[2])
		f, _ := strconv.Atoi(m[3])
		res[m[1]] = scenarioResult{passed: p, failed: f}
	}
	if len(res) == 0 {
		t.Fatalf("conformance against %s (%s) gave no summary (%v):\n%s\n%s", url, revision, err, stdout.String(), stderr.String())
	}
	addFailures(out, res)
	return res
}

// addFailures reads each failed scenario's checks.json for what failed.
func addFailures(dir string, res map[string]scenarioResult) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		for name, r := range res {
			if r.failed == 0 || !strings.HasPrefix(e.Name(), "server-"+name+"-2") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
			if err != nil {
				continue
			}
			var checks []struct {
				ID, Status, ErrorMessage string
			}
			json.Unmarshal(b, &checks)
			for _, c := range checks {
				if c.Status == "FAILURE" {
					r.failures = append(r.failures, c.ID+": "+c.ErrorMessage)
				}
			}
			res[name] = r
		}
	}
}

// startEverything runs go-sdk's everything-server on HTTP until the test
// ends and returns its /mcp URL.
func startEverything(t *testing.T, bin string, stateless bool) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, "-http", addr, "-stateless="+strconv.FormatBool(stateless))
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	proctest.WaitListening(t, addr, "everything-server", &stderr)
	return "http://" + addr + "/mcp"
}

// startTokenFront runs provlog with cfgText (a YAML config without data:)
// behind a reverse proxy that adds the local actor's bearer token, and
// returns the proxy's /mcp URL.
func startTokenFront(t *testing.T, cfgText string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfg, []byte("data: "+data+"\n"+cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startServe(t, "--config", cfg)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	target, _ := url.Parse(base)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // provlog judges the client's Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // event streams pass at once
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := hangWatch(t, rp)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("token proxy: %v", err)
		}
		full.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestConformance runs the conformance suite for both spec revisions,
// directly and through provlog, and fails on every scenario that fails
// only through provlog.
func TestConformance(t *testing.T) {
	node, cli, everything := conformanceTools(t)
	var only []string // PROVLOG_CONFORMANCE_SCENARIO runs one scenario, to work on it
	if s := os.Getenv("PROVLOG_CONFORMANCE_SCENARIO"); s != "" {
		only = []string{s}
	}
	for _, rev := range []struct {
		revision  string
		stateless bool // how the everything-server serves it directly
	}{
		{"2025-11-25", false},
		{"2026-07-28", true},
	} {
		t.Run(rev.revision, func(t *testing.T) {
			direct := runConformance(t, node, cli, startEverything(t, everything, rev.stateless), rev.revision, only...)
			routes := []struct{ name, cfg string }{
				{"stdio", fmt.Sprintf("servers:\n  - id: conf\n    command: [%q]\n    prefix: \"\"\n", everything)},
				{"http", fmt.Sprintf("servers:\n  - id: conf\n    url: %s\n    prefix: \"\"\n", startEverything(t, everything, rev.stateless))},
			}
			for _, route := range routes {
				t.Run(route.name, func(t *testing.T) {
					front := startTokenFront(t, route.cfg)
					through := runConformance(t, node, cli, front, rev.revision, only...)
					known := knownOnlyThroughProvlog[rev.revision+"/"+route.name]
					if len(only) == 1 {
						known = slices.DeleteFunc(slices.Clone(known), func(n string) bool { return n != only[0] })
					}
					compareConformance(t, direct, through, known)
				})
			}
		})
	}
}

// hangWatch logs the goroutines of the test process (provlog runs in it)
// when a request through h takes longer than a scenario may, so that a
// hang in provlog is seen where it happens.
func hangWatch(t *testing.T, h http.Handler) http.Handler {
	var dumped atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			h.ServeHTTP(w, r) // a standalone stream may stay open
			return
		}
		timer := time.AfterFunc(25*time.Second, func() {
			if !dumped.CompareAndSwap(false, true) {
				return
			}
			var b bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&b, 2)
			var keep []string
			for _, g := range strings.Split(b.String(), "\n\n") {
				if strings.Contains(g, "provlog/provlog/proxy") || strings.Contains(g, "go-sdk/mcp") {
					keep = append(keep, g)
				}
			}
			t.Logf("a %s %s through provlog has taken 25 s; provlog's goroutines:\n%s", r.Method, r.Header.Get("Mcp-Method"), strings.Join(keep, "\n\n"))
		})
		defer timer.Stop()
		h.ServeHTTP(w, r)
	})
}

// compareConformance logs both runs side by side and fails for each
// scenario that passed directly but not through provlog.
func compareConformance(t *testing.T, direct, through map[string]scenarioResult, known []string) {
	t.Helper()
	isKnown := map[string]bool{}
	for _, n := range known {
		isKnown[n] = true
	}
	var names []string
	for n := range direct {
		names = append(names, n)
	}
	for n := range through {
		if _, ok := direct[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	var dp, df, tp, tf int
	fmt.Fprintf(&sb, "%-48s %-10s %-10s\n", "scenario", "direct", "provlog")
	for _, n := range names {
		d, dok := direct[n]
		p, pok := through[n]
		dp, df, tp, tf = dp+d.passed, df+d.failed, tp+p.passed, tf+p.failed
		fmt.Fprintf(&sb, "%-48s %-10s %-10s\n", n, cell(d, dok), cell(p, pok))
		switch {
		case dok && d.failed > 0:
			// Fails directly too: the downstream's, not provlog's.
		case isKnown[n] && pok && worse(d, p):
			t.Logf("known: scenario %s fails only through provlog (%d of %d checks pass): %s", n, p.passed, p.passed+p.failed, strings.Join(p.failures, "; "))
		case isKnown[n]:
			t.Errorf("scenario %s now passes through provlog: remove it from knownOnlyThroughProvlog", n)
		case !pok:
			t.Errorf("scenario %s passes directly but did not run through provlog", n)
		case worse(d, p):
			t.Errorf("scenario %s passes directly (%d checks) but not through provlog (%d of %d checks pass): %s", n, d.passed, p.passed, p.passed+p.failed, strings.Join(p.failures, "; "))
		}
	}
	fmt.Fprintf(&sb, "%-48s %-10s %-10s\n", "total checks", fmt.Sprintf("%d/%d", dp, dp+df), fmt.Sprintf("%d/%d", tp, tp+tf))
	t.Logf("conformance, checks passed/run:\n%s", sb.String())
}

// worse reports whether a scenario that passes directly (d) does worse
// through provlog (p): a check fails, or fewer checks pass (a scenario
// stops early when a prerequisite step fails).
func worse(d, p scenarioResult) bool {
	return p.failed > 0 || p.passed < d.passed
}

func cell(r scenarioResult, ok bool) string {
	if !ok {
		return "not run"
	}
	return fmt.Sprintf("%d/%d", r.passed, r.passed+r.failed)
}

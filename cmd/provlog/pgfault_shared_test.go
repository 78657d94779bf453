package main

// Two real sidecars on one PostgreSQL log while the database faults.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestSharedStatusSaysDatabaseDown: with the shared log's PostgreSQL
// gone (its postmaster and backends killed with SIGKILL) under two idle
// sidecar processes, each one's provlog__status and the "storage" member
// of its /healthz say the database is unreachable, as /healthz's reasons
// do, and say ok again once it is back. They said "storage": "ok" and
// no error while /healthz answered 503 storage_failed.
func TestSharedStatusSaysDatabaseDown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	cluster := pgtest.NewCluster(t)
	procs, tokens, _, _ := twoSidecars(t, cluster.DSN, "")
	health := func(p *sidecarProc) (int, map[string]any) {
		resp, err := http.Get(p.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, h
	}
	status := func(p *sidecarProc) map[string]any {
		cs := connectHTTP(t, p.base, tokens["boss"])
		defer cs.Close()
		st, _, err := toolCall(cs, "provlog__status", map[string]any{})
		if err != nil {
			t.Fatalf("provlog__status: %v", err)
		}
		return st
	}
	logMember := func(st map[string]any) map[string]any {
		if l, ok := st["log"].(map[string]any); ok {
			return l
		}
		return st
	}
	for i, p := range procs {
		if st := logMember(status(p)); st["storage"] != "ok" {
			t.Fatalf("sidecar %d before the fault: storage %v", i, st["storage"])
		}
	}

	killPostmaster(t, cluster)
	for i, p := range procs {
		waitFor(t, "/healthz to see the database gone", func() bool { c, _ := health(p); return c == http.StatusServiceUnavailable })
		_, h := health(p)
		if h["storage"] != "database unreachable" {
			t.Errorf("sidecar %d /healthz while PostgreSQL is down: 503 with storage %q, error %q; want \"database unreachable\"", i, h["storage"], h["error"])
		}
		st := logMember(status(p))
		if st["storage"] != "database unreachable" || !strings.Contains(fmt.Sprint(st["error"]), "unreachable") {
			t.Errorf("sidecar %d provlog__status while PostgreSQL is down: storage %q, error %v; want \"database unreachable\"", i, st["storage"], st["error"])
		}
	}

	cluster.Start()
	for i, p := range procs {
		waitFor(t, "/healthz to see the database back", func() bool { c, _ := health(p); return c == http.StatusOK })
		if st := logMember(status(p)); st["storage"] != "ok" {
			t.Errorf("sidecar %d after PostgreSQL is back: storage %v", i, st["storage"])
		}
	}
}

// killPostmaster kills the cluster's postmaster and backends with SIGKILL,
// as a crashed database host leaves them, and clears what they left
// behind, so that cluster.Start starts it again (with crash recovery).
func killPostmaster(t *testing.T, c *pgtest.Cluster) {
	t.Helper()
	pgdata := strings.TrimSpace(pgtest.Psql(t, c.DSN, `SHOW data_directory`))
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pm := strings.SplitN(string(b), "\n", 2)[0]
	backends, _ := exec.Command("ps", "-o", "pid=", "--ppid", pm).Output()
	if out, err := exec.Command("kill", "-9", pm).CombinedOutput(); err != nil {
		t.Fatalf("kill -9 the postmaster %s: %v %s", pm, err, out)
	}
	for _, pid := range strings.Fields(string(backends)) {
		exec.Command("kill", "-9", pid).Run() // one that ended by itself is gone already
	}
	for exec.Command("kill", "-0", pm).Run() == nil {
		time.Sleep(10 * time.Millisecond) // until it is gone
	}
	os.Remove(filepath.Join(pgdata, "postmaster.pid"))
	locks, _ := filepath.Glob(filepath.Join(filepath.Dir(pgdata), ".s.PGSQL.*.lock"))
	for _, l := range locks {
		os.Remove(l)
	}
}

// TestSharedObservedClaimRace: one agent owns two tasks on a shared log
// and makes one call through sidecar process 0; then, at once, claims
// each task complete as observed on that call, one claim through each
// sidecar process. Exactly one claim is written in each round, the other
// is refused saying which task the call is evidence for, and audit
// through either sidecar passes.
func TestSharedObservedClaimRace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dsn := pgtest.DSN(t)
	fx := filepath.Join(t.TempDir(), "fx.txt")
	addr := startSidefxHTTP(t, fx)
	procs, tokens, _, datas := twoSidecars(t, dsn, fmt.Sprintf("servers:\n  - id: fx\n    url: http://%s/mcp\n", addr))
	var cs [2]*mcp.ClientSession
	for i, p := range procs {
		waitTools(t, p.base, tokens["a00"], []string{"fx__append"})
		cs[i] = connectHTTP(t, p.base, tokens["a00"])
	}
	const rounds = 20
	wins, refusals := 0, 0
	for r := range rounds {
		var tasks [2]string
		for i := range tasks {
			created, _, err := toolCall(cs[i], "create_task", map[string]any{"title": fmt.Sprintf("round %d task %d", r, i)})
			if err != nil {
				t.Fatal(err)
			}
			tasks[i] = created["task_id"].(string)
			if _, _, err := toolCall(cs[1-i], "accept_task", map[string]any{"task_id": tasks[i]}); err != nil {
				t.Fatal(err)
			}
		}
		_, rc, err := toolCall(cs[0], "fx__append", map[string]any{"text": fmt.Sprintf("round-%d", r)})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := log.ParseReceipt([]byte(rc))
		if err != nil {
			t.Fatal(err)
		}
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range tasks {
			wg.Go(func() {
				<-start
				_, _, errs[i] = toolCall(cs[i], "report_completion", map[string]any{"task_id": tasks[i], "provenance": "observed", "summary": "done", "evidence": []uint64{rec.Index}})
			})
		}
		close(start)
		wg.Wait()
		n := 0
		for i, err := range errs {
			switch {
			case err == nil:
				n++
				wins++
			case strings.Contains(err.Error(), tasks[1-i]):
				refusals++
			default:
				t.Errorf("round %d: the claim through sidecar %d: %v", r, i, err)
			}
		}
		if n != 1 {
			t.Errorf("round %d: %d observed claims on call %d written, want exactly 1: %v", r, n, rec.Index, errs)
		}
	}
	t.Logf("%d rounds: %d claims written, %d refused", rounds, wins, refusals)
	t.Setenv("PROVLOG_TOKEN", tokens["boss"])
	for i, p := range procs {
		if out, code := runCmd(t, "audit", "--log", p.base, "--vkey", filepath.Join(datas[i], logVKeyFile)); code != 0 {
			t.Errorf("audit through sidecar %d: %s", i, out)
		}
	}
}

// startSidefxHTTP starts the side-effect downstream (sidefx_test.go) as a
// process serving streamable HTTP, appending each call's text to file,
// and returns its address once it accepts connections.
func startSidefxHTTP(t *testing.T, file string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	down := exec.Command(exe, "-test.run=^$")
	down.Env = append(os.Environ(), sidefxEnv+"="+file, sidefxHTTPEnv+"="+addr)
	if err := down.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Process.Kill(); down.Wait() })
	waitFor(t, "the downstream to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// TestSharedHealthSeesReadOnly: with the shared log's database made
// read-only for new sessions (default_transaction_read_only, its
// connections ended, as a failover to a standby leaves them) under two
// idle sidecar processes, each one's /healthz says "database read-only"
// (503) before any call is refused, and ok again once the database
// takes writes for new sessions, its open ones left as they are. It said
// ok until a call happened to be refused.
func TestSharedHealthSeesReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	cluster := pgtest.NewCluster(t)
	procs, _, _, _ := twoSidecars(t, cluster.DSN, "")
	health := func(p *sidecarProc) (int, string) {
		resp, err := http.Get(p.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, fmt.Sprint(h["storage"])
	}
	endSessions := `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`
	pgtest.Psql(t, cluster.DSN, `ALTER DATABASE postgres SET default_transaction_read_only = on`)
	pgtest.Psql(t, cluster.DSN, endSessions)
	for i, p := range procs {
		waitFor(t, fmt.Sprintf("sidecar %d's /healthz to say the database is read-only", i), func() bool {
			code, storage := health(p)
			return code == http.StatusServiceUnavailable && storage == "database read-only"
		})
	}
	// Writable again for new sessions; the sessions open now are left as
	// they are, read-only.
	pgtest.Psql(t, cluster.DSN, `BEGIN READ WRITE; ALTER DATABASE postgres RESET default_transaction_read_only; COMMIT`)
	for i, p := range procs {
		waitFor(t, fmt.Sprintf("sidecar %d's /healthz to say ok", i), func() bool {
			code, storage := health(p)
			return code == http.StatusOK && storage == "ok"
		})
	}
}

// TestSharedDatabaseDiskFull: the shared log's PostgreSQL on a small
// tmpfs, filled under two sidecar processes calling a downstream with a
// side effect: a commit the database refuses for want of space (SQLSTATE
// 53100, nothing committed) makes each sidecar refuse that call saying
// the database's disk is full; once space is freed both record and
// forward calls again, without a restart, every side effect is in the
// log and audit passes. Before, the first such commit stopped each log
// for good ("log stopped; restart provlog"), its /healthz naming the
// storage only "stopped".
func TestSharedDatabaseDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	mnt := t.TempDir()
	mountTmpfs(t, mnt, "160m")
	for _, d := range []string{mnt, filepath.Dir(mnt)} {
		if err := os.Chmod(d, 0o755); err != nil { // for the postgres user
			t.Fatal(err)
		}
	}
	old, had := os.LookupEnv("TMPDIR")
	t.Setenv("TMPDIR", mnt) // the cluster's dir, and no other's
	cluster := pgtest.NewCluster(t)
	if os.Unsetenv("TMPDIR"); had {
		os.Setenv("TMPDIR", old)
	}
	effects := filepath.Join(t.TempDir(), "fx.txt")
	addr := startSidefxHTTP(t, effects)
	procs, tokens, _, datas := twoSidecars(t, cluster.DSN, fmt.Sprintf("servers:\n  - id: fx\n    url: http://%s/mcp\n", addr))
	var cs [2]*mcp.ClientSession
	for i, p := range procs {
		waitTools(t, p.base, tokens["a00"], []string{"fx__append"})
		cs[i] = connectHTTP(t, p.base, tokens["a00"])
	}
	n := 0
	call := func(i int) error {
		n++
		_, _, err := toolCall(cs[i], "fx__append", map[string]any{"text": fmt.Sprintf("call-%d-%s", n, strings.Repeat("p", 4000))})
		return err
	}
	for i := range cs {
		if err := call(i); err != nil {
			t.Fatal(err)
		}
	}
	filler := fill(t, mnt)
	var refused [2]error
	for i := range cs {
		for k := 0; k < 500 && refused[i] == nil; k++ {
			refused[i] = call(i)
		}
		if refused[i] == nil {
			t.Fatalf("sidecar %d: 500 calls recorded on a full database", i)
		}
		if msg := refused[i].Error(); !strings.Contains(msg, "disk full") || strings.Contains(msg, "restart provlog") {
			t.Errorf("sidecar %d on a full database: %v; want a refusal saying the database's disk is full, until it has space", i, refused[i])
		}
	}
	os.Remove(filler)
	for i := range cs {
		var err error
		for k := 0; k < 100; k++ {
			if err = call(i); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("sidecar %d with space freed: %v", i, err)
		}
	}
	st, err := logpg.Open(t.Context(), cluster.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lat, err := st.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.Entries(t.Context(), 0, lat.Size)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for _, e := range es {
		for _, m := range regexp.MustCompile(`"call-([0-9]+)-`).FindAllSubmatch(e, -1) {
			logged[string(m[1])] = true
		}
	}
	fx, _ := os.ReadFile(effects)
	lines := strings.Fields(string(fx))
	for _, l := range lines {
		if k := strings.Split(l, "-"); !logged[k[1]] {
			t.Errorf("the side effect of call %s is not in the log", k[1])
		}
	}
	t.Logf("%d calls, %d side effects; log size %d", n, len(lines), lat.Size)
	t.Setenv("PROVLOG_TOKEN", tokens["boss"])
	for i, p := range procs {
		if out, code := runCmd(t, "audit", "--log", p.base, "--vkey", filepath.Join(datas[i], logVKeyFile)); code != 0 {
			t.Errorf("audit through sidecar %d: %s", i, out)
		}
	}
}

package main

// Two real sidecars on one PostgreSQL log while the database faults.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

package main

// Two real sidecars on one PostgreSQL log under load from MCP clients on
// both, calling a downstream whose tool has a side effect, while one is
// killed and the database's connections are cut.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestSharedKillUnderSideEffects: four clients, two on each of two
// sidecar processes, call a downstream that appends each call's text to a
// file. Sidecar 0 is killed with SIGKILL three times in the middle of it
// and started again, and every connection to the database is ended once
// (pg_terminate_backend). Sidecar 1 records calls while 0 is down, the
// restarted one records calls again, every side effect that happened has
// its call entry in the one log, and audit through either passes.
func TestSharedKillUnderSideEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dsn := pgtest.NewCluster(t).DSN
	effects := filepath.Join(t.TempDir(), "fx.txt")
	addr := startSidefxHTTP(t, effects)
	procs, tokens, _, datas := twoSidecars(t, dsn, fmt.Sprintf("servers:\n  - id: fx\n    url: http://%s/mcp\n", addr))
	var bases [2]atomic.Value
	for i, p := range procs {
		waitTools(t, p.base, tokens["boss"], []string{"fx__append"})
		bases[i].Store(p.base)
	}
	var seq atomic.Int64
	var recorded [2]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var cs *mcp.ClientSession
			defer func() {
				if cs != nil {
					cs.Close()
				}
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if cs == nil {
					c := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "1"}, nil)
					var err error
					cs, err = c.Connect(t.Context(), &mcp.StreamableClientTransport{
						Endpoint: bases[g%2].Load().(string) + "/mcp", HTTPClient: &http.Client{Transport: bearer{tokens[fmt.Sprintf("a%02d", g)]}},
					}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
					if err != nil { // its sidecar is down
						cs = nil
						time.Sleep(50 * time.Millisecond)
						continue
					}
				}
				if _, _, err := toolCall(cs, "fx__append", map[string]any{"text": fmt.Sprintf("call-%d", seq.Add(1))}); err != nil {
					cs.Close()
					cs = nil
					continue
				}
				recorded[g%2].Add(1)
			}
		})
	}
	waitFor(t, "calls through both", func() bool { return recorded[0].Load() > 20 && recorded[1].Load() > 20 })
	pgtest.Psql(t, dsn, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	for round := range 3 {
		procs[0].kill()
		n := recorded[1].Load()
		waitFor(t, fmt.Sprintf("sidecar 1 to record calls while 0 is down (round %d)", round), func() bool { return recorded[1].Load() > n+20 })
		procs[0].start()
		bases[0].Store(procs[0].base)
		n = recorded[0].Load()
		waitFor(t, fmt.Sprintf("the restarted sidecar to record calls (round %d)", round), func() bool { return recorded[0].Load() > n+20 })
	}
	close(stop)
	wg.Wait()

	st, err := logpg.Open(t.Context(), dsn, nil)
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
	re := regexp.MustCompile(`"call-([0-9]+)"`)
	for _, e := range es {
		for _, m := range re.FindAllSubmatch(e, -1) {
			logged[string(m[1])] = true
		}
	}
	fx, err := os.ReadFile(effects)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(fx))
	for _, l := range lines {
		if !logged[strings.TrimPrefix(l, "call-")] {
			t.Errorf("the side effect of %s is not in the log", l)
		}
	}
	t.Logf("%d calls recorded through sidecar 0, %d through 1; %d side effects; log size %d", recorded[0].Load(), recorded[1].Load(), len(lines), lat.Size)
	t.Setenv("PROVLOG_TOKEN", tokens["boss"])
	for i, p := range procs {
		if out, code := runCmd(t, "audit", "--log", p.base, "--vkey", filepath.Join(datas[i], logVKeyFile)); code != 0 {
			t.Errorf("audit through sidecar %d: %s", i, out)
		}
	}
}

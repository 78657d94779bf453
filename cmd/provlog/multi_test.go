package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// serveChildEnv makes the test binary run provlog with the JSON array of
// arguments it holds, as the provlog binary would: a real sidecar process
// that a test can kill -9.
const serveChildEnv = "PROVLOG_SERVE_CHILD_ARGS"

func serveChild(args string) int {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		fmt.Fprintln(os.Stderr, "serve child:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, argv, os.Stdout, os.Stderr)
}

// A sidecarProc is a provlog serve process.
type sidecarProc struct {
	t      *testing.T
	args   []string
	base   string
	cmd    *exec.Cmd
	stderr *proctest.Buffer
}

func startSidecarProc(t *testing.T, args ...string) *sidecarProc {
	t.Helper()
	p := &sidecarProc{t: t, args: args}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *sidecarProc) start() {
	p.t.Helper()
	addr := freeAddr(p.t)
	argv, _ := json.Marshal(append([]string{"serve", "--http", addr}, p.args...))
	p.cmd = childCmd(p.t, serveChildEnv+"="+string(argv))
	p.stderr = &proctest.Buffer{}
	p.cmd.Stderr, p.cmd.Stdout = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.base = "http://" + addr
	// Its end is not watched: kill waits for it.
	cmdtest.WaitHealthy(p.t, p.base, (chan error)(nil), p.stderr)
}

func (p *sidecarProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		p.cmd = nil
		// Under -race the sidecar is race-built too; it never exits on its
		// own, so its reports are looked for here.
		if out := p.stderr.String(); strings.Contains(out, "WARNING: DATA RACE") {
			p.t.Errorf("the sidecar reported a data race:\n%s", out)
		}
	}
}

// toolCall calls a tool and returns its structured result and receipt, or
// the tool error.
func toolCall(cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, "", err
	}
	if res.IsError {
		return nil, "", fmt.Errorf("%s: %s", name, contentText(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	rc, _ := res.Meta["dev.provlog/receipt"].(string)
	return out, rc, nil
}

// twoSidecars makes two data dirs holding the same log keys (copied, as an
// operator would), a config listing actors a00…a49 and "boss", and starts
// a sidecar on each, on one PostgreSQL log.
func twoSidecars(t *testing.T, dsn, extraConfig string) (procs [2]*sidecarProc, tokens map[string]string, vkey note.Verifier, datas [2]string) {
	t.Helper()
	dir := t.TempDir()
	datas = sharedDataDirs(t, dir)
	tokens = map[string]string{}
	var cfg strings.Builder
	cfg.WriteString("actors:\n")
	for i := range 51 {
		id := fmt.Sprintf("a%02d", i)
		if i == 50 {
			id = "boss"
		}
		tok := fmt.Sprintf("token-%s-%d", id, i)
		tokens[id] = tok
		sum := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&cfg, "  - id: %s\n    token_sha256: %s\n", id, hex.EncodeToString(sum[:]))
	}
	cfg.WriteString(extraConfig)
	cfgPath := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range procs {
		procs[i] = startSidecarProc(t, "--config", cfgPath, "--data", datas[i], "--store", dsn)
	}
	k, err := loadKeys(datas[0])
	if err != nil {
		t.Fatal(err)
	}
	return procs, tokens, k.verifier, datas
}

// sharedDataDirs makes dir/a and dir/b holding the same log keys
// (copied, as an operator would), for two sidecars of one shared log.
func sharedDataDirs(t *testing.T, dir string) [2]string {
	t.Helper()
	datas := [2]string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	if err := keygen(datas[0], "provlog.test/shared"); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(datas[1], 0o700)
	for _, f := range []string{logKeyFile, logVKeyFile, anchorKeyFile, anchorPubFile} {
		b, err := os.ReadFile(filepath.Join(datas[0], f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(datas[1], f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return datas
}

// TestSidecarsShareALog runs two real provlog serve processes on one
// PostgreSQL log: 50 actors race to accept one task through both (exactly
// one wins, one entry), a handoff made through one is accepted through the
// other, one is killed with SIGKILL under load while the other keeps
// serving and nothing acknowledged is lost, it rejoins, and audit through
// either rebuilds the same task state.
func TestSidecarsShareALog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dsn := pgtest.DSN(t)
	procs, tokens, verifier, datas := twoSidecars(t, dsn, "")
	session := func(p *sidecarProc, actor string) *mcp.ClientSession { return connectHTTP(t, p.base, tokens[actor]) }

	// The race.
	boss := session(procs[0], "boss")
	created, _, err := toolCall(boss, "create_task", map[string]any{"title": "one owner only"})
	if err != nil {
		t.Fatal(err)
	}
	id := created["task_id"].(string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	var refusals int
	sessions := make([]*mcp.ClientSession, 50)
	for i := range sessions {
		sessions[i] = session(procs[i%2], fmt.Sprintf("a%02d", i))
	}
	start := make(chan struct{})
	for i, cs := range sessions {
		wg.Go(func() {
			<-start
			_, _, err := toolCall(cs, "accept_task", map[string]any{"task_id": id})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, fmt.Sprintf("a%02d", i))
			} else if strings.Contains(err.Error(), "owned_by_another") {
				refusals++
			} else {
				t.Errorf("a%02d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 || refusals != 49 {
		t.Fatalf("accept race: winners %v, %d refused as owned; want exactly one winner", winners, refusals)
	}
	winner := winners[0]
	var wi int
	fmt.Sscanf(winner, "a%02d", &wi)

	// Handoff through the winner's sidecar, accepted through the other.
	to := fmt.Sprintf("a%02d", (wi+1)%50) // on the other sidecar
	if _, _, err := toolCall(sessions[wi], "handoff_task", map[string]any{"task_id": id, "to": to, "note": "yours"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := toolCall(sessions[(wi+1)%50], "accept_task", map[string]any{"task_id": id}); err != nil {
		t.Fatalf("accepting through sidecar %d a handoff made through sidecar %d: %v", (wi+1)%2, wi%2, err)
	}
	for i, p := range procs {
		st, _, err := toolCall(session(p, "boss"), "get_task_status", map[string]any{"task_id": id})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(st); !strings.Contains(string(b), `"owner":"`+to+`"`) {
			t.Errorf("sidecar %d says %s", i, b)
		}
	}

	// Load through both, then kill -9 sidecar 0 in the middle of it.
	type ack struct{ rc string }
	var acks []ack
	stopLoad := make(chan struct{})
	var afterKill [2]int
	killed := make(chan struct{})
	var load sync.WaitGroup
	for g := range 8 {
		load.Go(func() {
			p := procs[g%2]
			cs := session(p, fmt.Sprintf("a%02d", g))
			for n := 0; ; n++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				_, rc, err := toolCall(cs, "create_task", map[string]any{"title": fmt.Sprintf("load %d %d", g, n)})
				if err != nil {
					if g%2 == 0 {
						return // the killed sidecar
					}
					t.Errorf("sidecar 1 failed while sidecar 0 was killed: %v", err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{rc})
				select {
				case <-killed:
					afterKill[g%2]++
				default:
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	procs[0].kill()
	close(killed)
	time.Sleep(1500 * time.Millisecond)
	close(stopLoad)
	load.Wait()
	if afterKill[1] == 0 {
		t.Fatal("sidecar 1 served no call after sidecar 0 was killed")
	}

	// Nothing acknowledged is lost: every receipt verifies and its entry is
	// in the log at its index, and every checkpoint handed out is a prefix
	// of the log as it now is.
	st, err := logpg.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	final, err := st.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fc, _, err := log.OpenCheckpoint(final.Checkpoint, verifier)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		r, err := log.ParseReceipt([]byte(a.rc))
		if err != nil {
			t.Fatal(err)
		}
		es, err := st.Entries(t.Context(), r.Index, r.Index+1)
		if err != nil {
			t.Fatalf("acknowledged entry %d: %v", r.Index, err)
		}
		c, err := r.Verify(log.LeafHash(es[0]), verifier)
		if err != nil {
			t.Fatalf("receipt for %d: %v", r.Index, err)
		}
		p, err := log.ProveConsistency(t.Context(), st, c.Size, fc.Size)
		if err == nil {
			err = log.VerifyConsistency(c.Size, fc.Size, p, c.Hash, fc.Hash)
		}
		if err != nil {
			t.Fatalf("checkpoint %d handed out is not a prefix of the log: %v", c.Size, err)
		}
	}
	t.Logf("%d calls acknowledged, %d through sidecar 1 after sidecar 0 was killed; log size %d", len(acks), afterKill[1], fc.Size)

	// The killed sidecar rejoins and serves.
	procs[0].start()
	if _, _, err := toolCall(session(procs[0], "boss"), "create_task", map[string]any{"title": "back"}); err != nil {
		t.Fatalf("restarted sidecar: %v", err)
	}

	// One accept entry for the raced task in the whole log; audit through
	// either sidecar rebuilds the same state.
	n := 0
	es, err := st.Entries(t.Context(), 0, fc.Size)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if bytes.Contains(e, []byte(`"kind":"task.accept"`)) && bytes.Contains(e, []byte(id)) {
			n++
		}
	}
	if n != 2 { // the race's winner, and the handoff's recipient
		t.Fatalf("%d task.accept entries for the raced task, want 2 (one race winner, one after the handoff)", n)
	}
	var outs [2]string
	for i, p := range procs {
		t.Setenv("PROVLOG_TOKEN", tokens["boss"])
		out, code := runCmd(t, "audit", "--log", p.base, "--vkey", filepath.Join(datas[i], logVKeyFile))
		if code != 0 {
			t.Fatalf("audit through sidecar %d: %s", i, out)
		}
		// What each shows of the task (stdout); stderr names the sidecar.
		var task, errb bytes.Buffer
		if code := run(context.Background(), []string{"tasks", "--log", p.base, "show", id}, &task, &errb); code != 0 {
			t.Fatalf("tasks show through sidecar %d: %s%s", i, task.String(), errb.String())
		}
		outs[i] = task.String()
	}
	if outs[0] != outs[1] {
		t.Fatalf("the sidecars show the task differently:\n%s\n%s", outs[0], outs[1])
	}
}

// TestSidecarsPostgresDown stops PostgreSQL under two sidecars with
// pg_ctl stop -m immediate: calls are refused, and never reach the
// downstream server, while it is gone; after it restarts they succeed
// again, and nothing acknowledged before the stop is lost.
func TestSidecarsPostgresDown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	cluster := pgtest.NewCluster(t)
	var forwarded atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "down", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "count"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		n := forwarded.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	procs, tokens, verifier, _ := twoSidecars(t, cluster.DSN, fmt.Sprintf("servers:\n  - id: down\n    url: %s\n", down.URL))
	var sessions [2]*mcp.ClientSession
	for i, p := range procs {
		sessions[i] = connectHTTP(t, p.base, tokens["boss"])
	}
	var acked []string
	call := func(i int) error {
		_, rc, err := toolCall(sessions[i], "down__count", map[string]any{})
		if err == nil {
			acked = append(acked, rc)
		}
		return err
	}
	for i := range sessions {
		if err := call(i); err != nil {
			t.Fatalf("sidecar %d before the stop: %v", i, err)
		}
	}

	cluster.Stop("immediate")
	before := forwarded.Load()
	for i := range sessions {
		if err := call(i); err == nil {
			t.Fatalf("sidecar %d forwarded a call while PostgreSQL was down", i)
		}
		if _, _, err := toolCall(sessions[i], "create_task", map[string]any{"title": "while down"}); err == nil {
			t.Fatalf("sidecar %d created a task while PostgreSQL was down", i)
		}
	}
	if n := forwarded.Load(); n != before {
		t.Fatalf("%d calls reached the downstream server while PostgreSQL was down", n-before)
	}
	health := func(p *sidecarProc) (int, string) {
		resp, err := http.Get(p.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for i, p := range procs {
		if code, body := health(p); code != http.StatusServiceUnavailable || !strings.Contains(body, "unreachable") {
			t.Errorf("sidecar %d /healthz while PostgreSQL is down: %d %s", i, code, body)
		}
	}

	cluster.Start()
	for i := range sessions {
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if err = call(i); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("sidecar %d after PostgreSQL restarted: %v", i, err)
		}
		if _, _, err := toolCall(sessions[i], "create_task", map[string]any{"title": "after"}); err != nil {
			t.Fatalf("sidecar %d: the task engine did not resume after PostgreSQL restarted: %v", i, err)
		}
		if code, body := health(procs[i]); code != http.StatusOK {
			t.Errorf("sidecar %d /healthz after PostgreSQL restarted: %d %s", i, code, body)
		}
	}
	st, err := logpg.Open(t.Context(), cluster.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, rc := range acked {
		r, err := log.ParseReceipt([]byte(rc))
		if err != nil {
			t.Fatal(err)
		}
		es, err := st.Entries(t.Context(), r.Index, r.Index+1)
		if err != nil {
			t.Fatalf("acknowledged entry %d lost: %v", r.Index, err)
		}
		if _, err := r.Verify(log.LeafHash(es[0]), verifier); err != nil {
			t.Fatalf("receipt for %d: %v", r.Index, err)
		}
	}
}

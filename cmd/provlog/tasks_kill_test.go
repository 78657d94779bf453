package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// actorsConfig writes a config listing n actors a00… and "boss", and
// returns its path and their tokens.
func actorsConfig(t *testing.T, dir string, n int) (string, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString("actors:\n")
	for i := range n + 1 {
		id := fmt.Sprintf("a%02d", i)
		if i == n {
			id = "boss"
		}
		tokens[id] = "token-" + id
		sum := sha256.Sum256([]byte(tokens[id]))
		fmt.Fprintf(&cfg, "  - id: %s\n    token_sha256: %s\n", id, hex.EncodeToString(sum[:]))
	}
	return writeFile(t, filepath.Join(dir, "provlog.yaml"), []byte(cfg.String())), tokens
}

// An ack is a task operation the sidecar acknowledged: the entry it says
// it wrote.
type ack struct {
	tool  string
	index uint64
	leaf  string
}

// TestTasksKilledMidRace drives the task tools of a real sidecar process
// from ten actors at once: they race to accept each new task (exactly one
// wins), then accept, hand off, release and claim at random while the
// sidecar is stopped: once with SIGTERM (it saves its task index), then
// twice with SIGKILL in the middle of the load (the saved index is then
// behind the log). After each stop the log read alone rebuilds the tasks
// with no violation, holds every acknowledged entry, and the restarted
// sidecar reports exactly that state, and no task has an owner unless its
// last entry gave it one.
func TestTasksKilledMidRace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := keygen(data, "provlog.test/tasks-kill"); err != nil {
		t.Fatal(err)
	}
	const actors = 10
	cfgPath, tokens := actorsConfig(t, dir, actors)
	p := startSidecarProc(t, "--config", cfgPath, "--data", data)
	var ids []string
	for round, stop := range []string{"SIGTERM", "SIGKILL", "SIGKILL"} {
		sessions := make([]*mcp.ClientSession, actors)
		for i := range sessions {
			sessions[i] = connectHTTP(t, p.base, tokens[fmt.Sprintf("a%02d", i)])
		}
		boss := connectHTTP(t, p.base, tokens["boss"])
		for range 3 {
			out, _, err := toolCall(boss, "create_task", map[string]any{"title": fmt.Sprintf("round %d", round)})
			if err != nil {
				t.Fatal(err)
			}
			id := out["task_id"].(string)
			ids = append(ids, id)
			raceAccept(t, sessions, id)
		}
		acks := churnTasks(t, p, sessions, ids, stop)
		if _, err := os.Stat(filepath.Join(data, tasksIndexFile)); err != nil {
			t.Fatalf("no task index after the %s: %v", stop, err)
		}
		size, want := checkTasksLog(t, data, acks, ids)
		p.start()
		checkServedTasks(t, connectHTTP(t, p.base, tokens["boss"]), want)
		t.Logf("round %d: %d acknowledged task operations, log size %d, stopped by %s", round, len(acks), size, stop)
	}
}

// raceAccept has every session accept task id at once: exactly one wins.
func raceAccept(t *testing.T, sessions []*mcp.ClientSession, id string) {
	t.Helper()
	var wins, owned atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, cs := range sessions {
		wg.Go(func() {
			<-start
			_, _, err := toolCall(cs, "accept_task", map[string]any{"task_id": id})
			switch {
			case err == nil:
				wins.Add(1)
			case strings.Contains(err.Error(), opp.RuleOwned):
				owned.Add(1)
			default:
				t.Errorf("accept: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || int(owned.Load()) != len(sessions)-1 {
		t.Fatalf("accept race on %s: %d won, %d refused as owned; want exactly one winner", id, wins.Load(), owned.Load())
	}
}

// churnTasks has the sessions accept, hand off, release and claim the
// tasks at random until 150 operations were acknowledged, then stops the
// sidecar with stop while they go on, and returns what was acknowledged.
func churnTasks(t *testing.T, p *sidecarProc, sessions []*mcp.ClientSession, ids []string, stop string) []ack {
	t.Helper()
	var mu sync.Mutex
	var acks []ack
	stopped := make(chan struct{})
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				select {
				case <-stopped:
					return
				default:
				}
				id := ids[rng.IntN(len(ids))]
				tool, args := "accept_task", map[string]any{"task_id": id}
				switch rng.IntN(5) {
				case 1:
					tool, args["to"] = "handoff_task", fmt.Sprintf("a%02d", (i+1+rng.IntN(len(sessions)-1))%len(sessions))
				case 2:
					tool = "release_task"
				case 3:
					tool, args["provenance"], args["summary"], args["source"] = "report_completion", "reported", "done", "boss"
				}
				out, _, err := toolCall(cs, tool, args)
				if err != nil {
					continue // refused, or cut off by the stop
				}
				e := out["entry"].(map[string]any)
				mu.Lock()
				acks = append(acks, ack{tool, uint64(e["index"].(float64)), e["leaf_hash"].(string)})
				if len(acks) == 150 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	<-enough
	if stop == "SIGTERM" {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
		p.cmd = nil
	} else {
		p.kill()
	}
	close(stopped)
	wg.Wait()
	return acks
}

// checkTasksLog reads the stopped sidecar's log: every acknowledged entry
// is in it, its tasks rebuild with no violation, and no task has an owner
// unless its last entry gave it one. It returns the log's size and the
// tasks ids as rebuilt, in JSON.
func checkTasksLog(t *testing.T, data string, acks []ack, ids []string) (uint64, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		es, err := s.Entries(ctx, a.index, a.index+1)
		if err != nil {
			t.Fatalf("acknowledged %s entry %d is not in the log of size %d: %v", a.tool, a.index, st.Size, err)
		}
		if got := hex.EncodeToString(log.LeafHash(es[0])); got != a.leaf {
			t.Fatalf("acknowledged %s entry %d has leaf hash %s, not %s", a.tool, a.index, got, a.leaf)
		}
	}
	tasks, err := opp.Rebuild(ctx, s, st.Size)
	if err != nil {
		t.Fatal(err)
	}
	if vs := tasks.Violations(); len(vs) > 0 {
		t.Fatalf("the log's task entries break rules: %v", vs)
	}
	want := map[string][]byte{}
	for _, id := range ids {
		task, err := tasks.Task(ctx, id)
		if err != nil || task == nil {
			t.Fatalf("task %s not rebuilt: %v", id, err)
		}
		last := task.History[len(task.History)-1].Kind
		if owned := last == opp.KindAccept || last == opp.KindClaim; owned != (task.Owner != "") {
			t.Fatalf("task %s has owner %q after a %s entry", id, task.Owner, last)
		}
		want[id], _ = json.Marshal(task)
	}
	return st.Size, want
}

// checkServedTasks checks that the restarted sidecar reports each task as
// the log alone rebuilt it (want, by id, in JSON).
func checkServedTasks(t *testing.T, boss *mcp.ClientSession, want map[string][]byte) {
	t.Helper()
	for id, b := range want {
		got, _, err := toolCall(boss, "get_task_status", map[string]any{"task_id": id})
		if err != nil {
			t.Fatal(err)
		}
		var w map[string]any
		json.Unmarshal(b, &w)
		if !reflect.DeepEqual(got, w) {
			g, _ := json.Marshal(got)
			t.Fatalf("task %s after the restart:\n  served  %s\n  rebuilt %s", id, g, b)
		}
	}
}

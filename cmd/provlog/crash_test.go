package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
)

var crashRounds = flag.Int("crash.rounds", 20, "SIGKILL rounds in TestCrashRecovery (raise for a soak)")

// crashChildEnv makes the test binary act as a sidecar appending under load.
const crashChildEnv = "PROVLOG_CRASH_CHILD_DATA"

func TestMain(m *testing.M) {
	proxy.ReaperMain()
	if sidefxChild() || leakfxChild() || tickfxChild() || forkfxChild() {
		return
	}
	if data := os.Getenv(crashChildEnv); data != "" {
		crashChild(data)
		return
	}
	if data := os.Getenv(faultChildEnv); data != "" {
		os.Exit(faultChild(data)) // storage_faults_test.go
	}
	if args := os.Getenv(serveChildEnv); args != "" {
		os.Exit(serveChild(args)) // multi_test.go
	}
	// testscript.Main runs the tests, or runs main as "provlog" when a
	// script execs it (script_test.go).
	testscript.Main(m, map[string]func(){"provlog": main})
}

// handedOut is one receipt as the child printed it after Append returned.
type handedOut struct {
	Index      uint64 `json:"index"`
	LeafHash   string `json:"leaf_hash"`
	Checkpoint string `json:"checkpoint"` // base64 signed note
}

// crashChild opens the data dir as the sidecar does and appends call-like
// entries from 16 goroutines until it is killed, printing each receipt
// only after Append returned it.
func crashChild(data string) {
	cfg := &Config{Data: data, Actor: "local"}
	sc, err := openSidecar(context.Background(), cfg, quietLogger(), true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				b := callEntry("crash", "append", map[string]any{"g": g, "i": i, "pad": strings.Repeat("x", rand.IntN(900))})
				r, err := sc.seq.Append(context.Background(), b)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(4)
				}
				line, _ := json.Marshal(handedOut{Index: r.Index, LeafHash: hex.EncodeToString(r.Extra), Checkpoint: base64.StdEncoding.EncodeToString(r.Checkpoint)})
				mu.Lock()
				out.Write(append(line, '\n'))
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestCrashRecovery kills a real process appending under load with SIGKILL
// at random moments, reopens the data dir each time, and checks that every
// receipt handed out before the kill is in the log at its index with its
// leaf hash, that every checkpoint handed out is consistent with the
// reopened tree, and that audit passes.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs real processes; skipped in -short")
	}
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.test/crash")
	var all []handedOut
	for round := range *crashRounds {
		cmd := childCmd(t, crashChildEnv+"="+data)
		c := startChild(t, cmd)
		var got []handedOut
		done := make(chan struct{})
		go func() {
			defer close(done)
			for c.lines.Scan() {
				var h handedOut
				if err := json.Unmarshal(c.lines.Bytes(), &h); err != nil {
					continue // the line the kill cut short: never handed out whole
				}
				got = append(got, h)
			}
		}()
		// Kill at a random moment: sometimes during start-up, mostly under load.
		time.Sleep(time.Duration(rand.IntN(400)+20) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child did not die by the signal (%v): %s", round, werr, c.stderr.String())
		}
		all = append(all, got...)
		checkAfterCrash(t, data, k, all)
		t.Logf("round %d: %d receipts handed out (%d in total)", round, len(got), len(all))
	}
	if len(all) == 0 {
		t.Fatal("no receipt was handed out in any round")
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"audit", "--data", data}, &out, &errb); code != 0 {
		t.Fatalf("audit after crashes: exit %d: %s%s", code, out.String(), errb.String())
	}
	t.Log(strings.TrimSpace(out.String()))
}

func checkAfterCrash(t *testing.T, data string, k *keys, receipts []handedOut) {
	t.Helper()
	ctx := context.Background()
	if ms, _ := filepath.Glob(filepath.Join(data, dbDir, "MANIFEST-*")); len(ms) == 0 && len(receipts) == 0 {
		return // killed before the child made its store (maybe after its directory): nothing to check yet
	}
	s, err := openStore(data, true)
	if err != nil {
		t.Fatalf("reopening after kill: %v", err)
	}
	defer s.Close()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size == 0 {
		if len(receipts) > 0 {
			t.Fatalf("%d receipts handed out, but the reopened log is empty", len(receipts))
		}
		return // killed before the first commit
	}
	final, _, err := log.OpenCheckpoint(st.Checkpoint, k.verifier)
	if err != nil {
		t.Fatalf("reopened checkpoint: %v", err)
	}
	seen := map[string]bool{}
	for _, h := range receipts {
		if h.Index >= st.Size {
			t.Fatalf("receipt for index %d handed out, but the reopened log has size %d", h.Index, st.Size)
		}
		e, err := s.Entries(ctx, h.Index, h.Index+1)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(log.LeafHash(e[0])); got != h.LeafHash {
			t.Fatalf("entry %d has leaf hash %s, the receipt said %s", h.Index, got, h.LeafHash)
		}
		if seen[h.Checkpoint] {
			continue
		}
		seen[h.Checkpoint] = true
		msg, _ := base64.StdEncoding.DecodeString(h.Checkpoint)
		c, _, err := log.OpenCheckpoint(msg, k.verifier)
		if err != nil {
			t.Fatalf("handed-out checkpoint: %v", err)
		}
		p, err := log.ProveConsistency(ctx, s, c.Size, final.Size)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.VerifyConsistency(c.Size, final.Size, p, c.Hash, final.Hash); err != nil {
			t.Fatalf("checkpoint of size %d handed out before the kill is not consistent with the reopened tree of size %d: %v", c.Size, final.Size, err)
		}
	}
}

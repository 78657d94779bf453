package main

// Storage faults on real processes: a data dir on a tmpfs that fills up,
// and one on a bind mount remounted read-only under load. Both need root
// (mount); outside CI a missing capability skips, in CI (CI=true) it
// fails.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
)

// faultChildEnv makes the test binary a sidecar that appends until the
// log refuses, then reports and reads.
const faultChildEnv = "PROVLOG_FAULT_CHILD_DATA"

// faultChildNEnv bounds the appends of each of its goroutines (default
// 25000: enough to fill the test's disks).
const faultChildNEnv = "PROVLOG_FAULT_CHILD_N"

// stopReport is the fault child's last line.
type stopReport struct {
	Error      string         `json:"error"`
	HealthCode int            `json:"healthz_code"`
	Health     map[string]any `json:"healthz"`
	Metrics    string         `json:"metrics"`
	ReadOK     bool           `json:"read_ok"`
	ReadErr    string         `json:"read_err"`
	Receipts   int            `json:"receipts"`
}

// faultChild appends from 8 goroutines, printing each receipt as it is
// handed out, until an append fails or it reads "go on" limits (200k
// entries); then it prints a stopReport as "STOP {json}" and exits 0. A
// panic exits 2, which the parent reports.
func faultChild(data string) int {
	cfg := &Config{Data: data, Actor: "local"}
	sc, err := openSidecar(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), true)
	if err != nil {
		fmt.Println("OPENFAIL", err)
		return 3
	}
	defer sc.close()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var first error
	n := 0
	per := 25000
	if v, err := strconv.Atoi(os.Getenv(faultChildNEnv)); err == nil {
		per = v
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; i < per; i++ {
				b := callEntry("fault", "append", map[string]any{"g": g, "i": i, "pad": strings.Repeat("y", 1000)})
				r, err := sc.seq.Append(context.Background(), b)
				mu.Lock()
				if err != nil {
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				n++
				line, _ := json.Marshal(handedOut{Index: r.Index, LeafHash: hex.EncodeToString(r.Extra), Checkpoint: base64.StdEncoding.EncodeToString(r.Checkpoint)})
				out.Write(append(line, '\n'))
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep := stopReport{Receipts: n}
	if first != nil {
		rep.Error = first.Error()
	}
	rec := httptest.NewRecorder()
	sc.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	rep.HealthCode = rec.Code
	json.Unmarshal(rec.Body.Bytes(), &rep.Health)
	rec = httptest.NewRecorder()
	sc.metrics(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "provlog_storage_fault") {
			rep.Metrics += l + "\n"
		}
	}
	// What is durable is still read and proved.
	size, _ := sc.seq.Checkpoint()
	if _, err := sc.store.Entries(context.Background(), 0, size); err != nil {
		rep.ReadErr = err.Error()
	} else if _, err := sc.prove(context.Background(), int64(size-1), nil); err != nil {
		rep.ReadErr = err.Error()
	} else {
		rep.ReadOK = true
	}
	line, _ := json.Marshal(rep)
	fmt.Fprintf(out, "STOP %s\n", line)
	out.Flush()
	if os.Getenv(faultChildResumeEnv) != "" {
		return resumeChild(sc, out)
	}
	return 0
}

// runFaultChild runs the fault child on data, calling during (if not nil)
// once it has handed out some receipts; it returns the receipts, the stop
// report and the child's stderr.
func runFaultChild(t *testing.T, data string, during func(), env ...string) ([]handedOut, *stopReport, string) {
	t.Helper()
	cmd := childCmd(t, append([]string{faultChildEnv + "=" + data}, env...)...)
	c := startChild(t, cmd)
	var got []handedOut
	var rep *stopReport
	for c.lines.Scan() {
		line := c.lines.Bytes()
		if s, ok := bytes.CutPrefix(line, []byte("STOP ")); ok {
			rep = &stopReport{}
			json.Unmarshal(s, rep)
			continue
		}
		if bytes.HasPrefix(line, []byte("OPENFAIL ")) {
			t.Logf("child: %s", line)
			continue
		}
		var h handedOut
		if json.Unmarshal(line, &h) == nil {
			got = append(got, h)
			if len(got) == 2000 && during != nil {
				during()
			}
		}
	}
	io.Copy(io.Discard, c.stdout)
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Fatalf("child: %v (a panic exits 2)\n%s", err, lastLines(c.stderr.String(), 30))
		}
	}
	return got, rep, c.stderr.String()
}

// lastLines is the last n lines of a child's stderr; if the child
// panicked, the panic and the stack of the goroutine that raised it come
// first (the tail alone is some other goroutine's stack).
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	tail := strings.Join(ls[max(0, len(ls)-n):], "\n")
	for i, l := range ls {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			head := strings.Join(ls[i:min(len(ls), i+60)], "\n")
			return head + "\n... (the last lines:)\n" + tail
		}
	}
	return tail
}

// smallDisk mounts a 24 MiB tmpfs until the test ends and makes a data
// dir for origin on it; it returns the mount point, the data dir and its
// keys. The tests that fill it run real processes: -short skips them.
func smallDisk(t *testing.T, origin string) (mnt, data string, k *keys) {
	t.Helper()
	if testing.Short() {
		t.Skip("real processes; skipped in -short")
	}
	mnt = t.TempDir()
	needMount(t, "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt)
	t.Cleanup(func() { umount(t, mnt) })
	data = filepath.Join(mnt, "data")
	return mnt, data, mustKeygen(t, data, origin)
}

// needMount mounts or fails/skips: tests that need root.
func needMount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("mount %s: %v: %s", strings.Join(args, " "), err, out)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (this test needs root to mount; CI must provide it)", msg)
		}
		t.Skip(msg)
	}
}

func umount(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Errorf("umount %s: %v: %s", dir, err, out)
	}
}

// checkStop checks a stop report: the log stopped for the named fault,
// /healthz and /metrics say so, and the durable log is still read.
func checkStop(t *testing.T, rep *stopReport, reason, stderr string) {
	t.Helper()
	if rep == nil {
		t.Fatalf("child printed no stop report\n%s", lastLines(stderr, 30))
	}
	if rep.Error == "" || !strings.Contains(rep.Error, reason) {
		t.Fatalf("appends stopped with %q, want %q", rep.Error, reason)
	}
	if rep.HealthCode != http.StatusServiceUnavailable || rep.Health["storage"] != reason {
		t.Fatalf("/healthz %d %v, want 503 with storage %q", rep.HealthCode, rep.Health, reason)
	}
	if !strings.Contains(rep.Metrics, fmt.Sprintf("provlog_storage_fault{reason=%q} 1", reason)) {
		t.Fatalf("/metrics: %q", rep.Metrics)
	}
	if !rep.ReadOK {
		t.Fatalf("reading the durable log after the fault: %s", rep.ReadErr)
	}
	// No spin: Pebble's retries of a failed flush are backed off, so a
	// run writes a bounded number of lines (without the backoff, hundreds
	// a second).
	if n := strings.Count(stderr, "\n"); n > 400 {
		t.Fatalf("child wrote %d stderr lines\n%s", n, lastLines(stderr, 20))
	}
}

// TestFullDisk runs a sidecar on a 24 MiB tmpfs until the disk fills: no
// panic, the log stops with "disk full" and says so, reads go on; a
// restart on the still-full disk comes up read-only at once, and audit
// works there; after space is freed, every acknowledged entry is there.
func TestFullDisk(t *testing.T) {
	mnt, data, k := smallDisk(t, "provlog.test/full")
	got, rep, stderr := runFaultChild(t, data, nil)
	checkStop(t, rep, "disk full", stderr)
	t.Logf("first run: %d receipts, stopped: %s", len(got), rep.Error)

	// Restart on the full disk: it opens, refuses appends, serves reads.
	got2, rep2, stderr2 := runFaultChild(t, data, nil)
	if rep2 != nil {
		checkStop(t, rep2, "disk full", stderr2)
	}
	got = append(got, got2...)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"audit", "--data", data}, &out, &errb); code != 0 {
		t.Fatalf("audit on the full disk: exit %d: %s%s", code, out.String(), errb.String())
	}

	// Free space: everything acknowledged is there, and the log goes on.
	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, out)
	}
	checkAfterCrash(t, data, k, got)
	got3, rep3, _ := runFaultChild(t, data, nil, faultChildNEnv+"=20")
	if rep3 == nil || rep3.Receipts == 0 {
		t.Fatalf("after freeing space, the log takes no appends: %+v", rep3)
	}
	checkAfterCrash(t, data, k, append(got, got3...))
}

// TestReadOnlyMidRun mounts a read-only bind of the data dir over it
// while a sidecar appends (the open files stay writable; every file opened
// afterwards is read-only): no panic (Pebble used to die with "sync:
// unlock of unlocked mutex" when it opened its next WAL), the log stops
// with "read-only" and says so; a restart on the read-only mount serves
// reads and audit works; back read-write, every acknowledged entry is
// there.
func TestReadOnlyMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes; skipped in -short")
	}
	probe := t.TempDir()
	needMount(t, "--bind", probe, probe)
	umount(t, probe)
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.test/ro")
	mounted := false
	defer func() {
		if mounted {
			umount(t, data)
		}
	}()
	got, rep, stderr := runFaultChild(t, data, func() {
		for _, args := range [][]string{{"--bind", data, data}, {"-o", "remount,ro,bind", data}} {
			if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
				t.Errorf("mount %v: %v: %s", args, err, out)
				return
			}
			mounted = true
		}
	})
	checkStop(t, rep, "read-only", stderr)
	t.Logf("%d receipts, stopped: %s", len(got), rep.Error)
	got2, rep2, stderr2 := runFaultChild(t, data, nil)
	if rep2 == nil {
		t.Fatalf("restart on the read-only mount printed no report\n%s", lastLines(stderr2, 20))
	}
	checkStop(t, rep2, "read-only", stderr2)
	got = append(got, got2...)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"audit", "--data", data}, &out, &errb); code != 0 {
		t.Fatalf("audit on the read-only mount: exit %d: %s%s", code, out.String(), errb.String())
	}
	umount(t, data)
	mounted = false
	checkAfterCrash(t, data, k, got)
}

// TestForkRefused damages a stopped sidecar's newest WAL so that Pebble
// would reopen it three batches short, and puts a cosigned checkpoint of
// another history beside it: serve refuses to start and audit fails, each
// naming the loss and what to do; nothing is served or signed.
func TestForkRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []string{"wal-tail", "cosigned-other-root"} {
		t.Run(tc, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cfg := &Config{Data: data, Actor: "local"}
			sc := mustOpenSidecar(t, cfg)
			for i := range 20 {
				b := callEntry("fork", "t", map[string]any{"i": i, "pad": strings.Repeat("z", 900)})
				if _, err := sc.seq.Append(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			size, _ := sc.seq.Checkpoint()
			sc.close()
			switch tc {
			case "wal-tail":
				wals, _ := filepath.Glob(filepath.Join(data, dbDir, "*.log"))
				w := wals[len(wals)-1]
				b, _ := os.ReadFile(w)
				b[len(b)-3500] ^= 0x40
				os.WriteFile(w, b, 0o600)
			case "cosigned-other-root":
				k, _ := loadKeys(data)
				other, _ := log.SignCheckpoint(log.Checkpoint{Origin: k.signer.Name(), Size: size - 2, Hash: bytes.Repeat([]byte{7}, 32)}, k.signer)
				os.WriteFile(filepath.Join(data, cosignedFile), other, 0o600)
			}
			if _, err := openSidecar(ctx, cfg, quietLogger(), true); err == nil || !strings.Contains(err.Error(), "acknowledged entries lost") || !strings.Contains(err.Error(), "new origin") {
				t.Fatalf("serve on a forked log: %v", err)
			}
			var out, errb bytes.Buffer
			code := run(ctx, []string{"audit", "--data", data}, &out, &errb)
			if code == 0 || !strings.Contains(errb.String()+out.String(), "acknowledged entries lost") {
				t.Fatalf("audit of a forked log: exit %d: %s%s", code, out.String(), errb.String())
			}
			t.Log(strings.TrimSpace(errb.String()))
		})
	}
}

package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestServedRecordFailureReported: the data dir's file system fails
// mid-run (an ext4 on a loop device shut down: every later write and sync
// of served.0/served.1 fails with EIO, as a dying disk's do; the log's
// store is on a tmpfs of its own and goes on). /log/checkpoint cannot
// keep the newer checkpoint it would serve, and answers 500; /healthz
// says degraded (200: calls are still recorded) with
// checkpoint_record_failing naming the file, /metrics has its gauge at
// 1, and provlog__status says it. Before, /healthz said ok and only the
// sidecar's log said why.
func TestServedRecordFailureReported(t *testing.T) {
	if testing.Short() {
		t.Skip("real mounts; skipped in -short")
	}
	img := filepath.Join(t.TempDir(), "data.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := t.TempDir()
	needMount(t, "-o", "loop", img, mnt)
	t.Cleanup(func() { umount(t, mnt) })
	data := filepath.Join(mnt, "data")
	if err := os.MkdirAll(filepath.Join(data, dbDir), 0o700); err != nil {
		t.Fatal(err)
	}
	needMount(t, "-t", "tmpfs", "-o", "size=64m", "tmpfs", filepath.Join(data, dbDir))
	t.Cleanup(func() { umount(t, filepath.Join(data, dbDir)) })

	base, _ := startServe(t, "--data", data)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, base, strings.TrimSpace(string(tok)))
	checkpoint := func() (int, string) {
		resp, err := http.Get(base + "/log/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	callTool(t, cs, "create_task", map[string]any{"title": "before the fault"})
	if code, body := checkpoint(); code != http.StatusOK {
		t.Fatalf("checkpoint before the fault: %d %s", code, body)
	}
	if h, code := getHealth(t, base); code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("before the fault: %d %+v", code, h)
	}

	shutdownExt4(t, mnt)
	callTool(t, cs, "create_task", map[string]any{"title": "after the fault"})
	if code, body := checkpoint(); code != http.StatusInternalServerError {
		t.Errorf("checkpoint after the fault: %d %s, want 500 (the newer one cannot be kept)", code, body)
	}
	const reason = "checkpoint_record_failing"
	h, code := getHealth(t, base)
	if code != http.StatusOK || h.Status != "degraded" || len(h.Reasons) != 1 || h.Reasons[0].Reason != reason ||
		!strings.Contains(h.Reasons[0].Detail, filepath.Join(data, "served.")) {
		t.Errorf("/healthz after the fault: %d %+v, want degraded (200) with %s naming the served record", code, h, reason)
	}
	t.Logf("/healthz: %d %+v", code, h)
	if m := getMetrics(t, base); !strings.Contains(m, "\nprovlog_health_"+reason+" 1\n") {
		t.Errorf("metrics have no provlog_health_%s 1", reason)
	}
	status, _ := callTool(t, cs, "provlog__status", nil)
	if s := string(mustJSON(t, status)); !strings.Contains(s, "served.") {
		t.Errorf("provlog__status does not name the failed record: %s", s)
	}
}

// shutdownExt4 shuts the ext4 mounted at mnt down (EXT4_IOC_SHUTDOWN,
// without flushing its journal): every later write and sync on it fails
// with EIO.
func shutdownExt4(t *testing.T, mnt string) {
	t.Helper()
	d, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const ext4IocShutdown, noLogFlush = 0x8004587d, 2 // _IOR('X', 125, __u32); EXT4_GOING_FLAGS_NOLOGFLUSH
	flags := uint32(noLogFlush)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, d.Fd(), ext4IocShutdown, uintptr(unsafe.Pointer(&flags))); e != 0 {
		t.Fatalf("shutting down the ext4 at %s: %v", mnt, e)
	}
}

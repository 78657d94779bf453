// Package host reads what the benchmark programs report about the machine
// they ran on: the CPU, the load, the file system under a directory and
// what an fsync costs there, from /proc and the disk itself.
package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUModel is /proc/cpuinfo's model name, or "unknown".
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// LoadAvg is the 1, 5 and 15 minute load averages from /proc/loadavg, or
// "unknown".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// A Mount is one line of /proc/mounts.
type Mount struct {
	Type, Device, Point, Options string
}

// MountOf returns the mount holding dir (the longest mount point above
// it), from /proc/mounts; ok is false if it cannot be read.
func MountOf(dir string) (m Mount, ok bool) {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		p = dir
	}
	p, _ = filepath.Abs(p)
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return Mount{}, false
	}
	bestLen := -1
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		if (p == mp || mp == "/" || strings.HasPrefix(p, mp+"/")) && len(mp) > bestLen {
			m, bestLen = Mount{Type: f[2], Device: f[0], Point: mp}, len(mp)
			if len(f) > 3 {
				m.Options = f[3]
			}
		}
	}
	return m, bestLen >= 0
}

// FsyncProbe appends 4 KiB to a file in dir and fdatasyncs it n times,
// each after idle of doing nothing, and returns how long each append and
// sync took: the disk's durability cost at the time, which other work on
// the machine can inflate. With idle 0 the syncs come back to back; with
// the time a lone tool call spends away from the log between its two
// commits (the downstream's answer, the client's next request), the probe
// pays what such a commit pays on this machine after its CPU went idle (on
// a virtual machine, the wake-up of a halted vCPU with the disk's
// interrupt: seen here, 150 µs back to back against 245 µs after 1.5 ms).
func FsyncProbe(dir string, n int, idle time.Duration) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, n)
	for range n {
		if idle > 0 {
			time.Sleep(idle)
		}
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// SchedWait is the time a thread or process has spent runnable but
// waiting for a CPU (/proc/…/schedstat, its second field; 0 if it cannot
// be read): on a loaded machine, what a round trip to another process
// waits for beyond its work.
func SchedWait(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(ns)
}

// SelfSchedWait is SchedWait of this process's threads together.
func SelfSchedWait() time.Duration {
	var w time.Duration
	tasks, _ := filepath.Glob("/proc/self/task/[0-9]*")
	for _, t := range tasks {
		w += SchedWait(t + "/schedstat")
	}
	return w
}

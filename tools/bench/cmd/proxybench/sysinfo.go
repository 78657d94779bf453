package main

// What /proc and the machine say: memory, CPU time, sockets, load, the
// fsync probe, the file system and the CPU model.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

// vmHWM returns a process's peak resident set size in MiB.
func vmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no VmHWM")
}

// memSplit is a process's resident memory, split: anonymous (its heaps,
// Go's and C's, and stacks) and file-backed (mostly the pages of its
// executable that it has touched, shared with every process mapping the
// same file), in MiB.
type memSplit struct{ anon, file float64 }

// rssSplit reads a process's RssAnon and RssFile.
func rssSplit(pid int) (memSplit, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memSplit{}, err
	}
	var m memSplit
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "RssAnon":
			m.anon = kb / 1024
		case "RssFile":
			m.file = kb / 1024
		}
	}
	return m, nil
}

// watchMem samples a process's resident memory every 100 ms until stop is
// called, which returns the sample with the most anonymous memory.
func watchMem(pid int) (stop func() memSplit) {
	done, out := make(chan struct{}), make(chan memSplit, 1)
	go func() {
		var peak memSplit
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := rssSplit(pid); err == nil && m.anon >= peak.anon {
				peak = m
			}
			select {
			case <-done:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() memSplit { close(done); return <-out }
}

// cpuTime returns the user+system CPU time of a process (all threads), in
// the kernel's clock ticks (USER_HZ, 100 per second on Linux).
func cpuTime(pid int) time.Duration {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// timeWait returns the IPv4 TCP sockets in TIME_WAIT with port at either
// end, by their address pair (/proc/net/tcp). Port 0 watches nothing.
func timeWait(port int) map[string]bool {
	out := map[string]bool{}
	if port == 0 {
		return out
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return out
	}
	hexPort := fmt.Sprintf(":%04X", port)
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[3] != "06" { // 06: TIME_WAIT
			continue
		}
		if strings.HasSuffix(f[1], hexPort) || strings.HasSuffix(f[2], hexPort) {
			out[f[1]+"-"+f[2]] = true
		}
	}
	return out
}

// idleGap is the idle time before each sync of the second fsync probe:
// about what a lone call's commits wait apart in A2 (the downstream's
// answer; the client's next request).
const idleGap = 1500 * time.Microsecond

// A probe is one fsync probe: its text for the header, and the p50 of a
// sync after idleGap, the floor of a lone call's commit on this machine.
type probe struct {
	text    string
	idleP50 time.Duration // 0 if the probe failed
}

// fsyncProbe times n 4 KiB appends each followed by fdatasync in dir (as
// logbench does), back to back (how busy the disk under the data dirs is)
// and each after idleGap of idle (what a lone call's commit pays).
func fsyncProbe(dir string, n int) probe {
	lat, err := host.FsyncProbe(dir, n, 0)
	if err != nil {
		return probe{text: "failed: " + err.Error()}
	}
	idle, err := host.FsyncProbe(dir, n, idleGap)
	if err != nil {
		return probe{text: "failed: " + err.Error()}
	}
	return probe{
		text: fmt.Sprintf("p50 %s, p99 %s back to back; p50 %s, p99 %s after %v idle",
			ms(pct(lat, 50)), ms(pct(lat, 99)), ms(pct(idle, 50)), ms(pct(idle, 99)), idleGap),
		idleP50: pct(idle, 50),
	}
}

// filesystemOf returns "<fstype> <device> on <mountpoint>" for the mount
// holding dir.
func filesystemOf(dir string) string {
	m, ok := host.MountOf(dir)
	if !ok {
		return "unknown filesystem"
	}
	return fmt.Sprintf("%s %s on %s", m.Type, m.Device, m.Point)
}

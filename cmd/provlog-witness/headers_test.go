package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// peakRSS returns the peak resident set size of process pid, in KiB.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestHugeHeadersBounded: a client with network access and no key sends
// request headers and never ends them. The witness bounded the body
// (64 KiB) but took up to Go's default 1 MiB of headers from each
// connection, held until the header timeout: 100 connections grew it by
// 77 MiB. Its memory must grow by a small part of that.
func TestHugeHeadersBounded(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/headers")
	l := witnesstest.NewLog(t, k, "honest")
	l.Grow(t, 2)
	cfgPath, _ := witnessSetup(t, k)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	url := "http://" + addr
	cmd, _ := startWitness(t, bin, cfgPath, addr)
	if st, b := addCheckpoint(t, url, l, 0, 1); st != http.StatusOK {
		t.Fatalf("%d %q", st, b)
	}
	before := peakRSS(t, cmd.Process.Pid)
	const conns = 100
	line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		c.Write([]byte("POST /add-checkpoint HTTP/1.1\r\nHost: w\r\n"))
		for range 1024 {
			if _, err := c.Write([]byte(line)); err != nil {
				break // the witness closed it: it read enough
			}
		}
	}
	grew := (peakRSS(t, cmd.Process.Pid) - before) / 1024
	t.Logf("%d connections of unfinished headers: +%d MiB", conns, grew)
	if grew > 16 {
		t.Errorf("%d connections of unfinished 1 MiB headers grew the witness by %d MiB", conns, grew)
	}
	if st, b := addCheckpoint(t, url, l, 1, 2); st != http.StatusOK {
		t.Fatalf("%d %q", st, b)
	}
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// establishedTo counts the server's established TCP connections on port
// (the sidecar's side of them: local port = port), from /proc/net/tcp.
func establishedTo(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "01" {
			n++
		}
	}
	return n
}

// TestFrontSlowReaders: clients that send the log API (and /healthz)
// pipelined requests and read none of the answers, until the server's
// writes block, are given up once a write makes no progress for the write
// timeout: their connections do not stay open for ever, each holding a
// goroutine and a file descriptor (the connections of 20 such clients
// were all still open after 75 s, well past every timeout the sidecar
// had), and other clients are served meanwhile.
func TestFrontSlowReaders(t *testing.T) {
	base, _ := startServe(t, "--data", t.TempDir())
	addr := strings.TrimPrefix(base, "http://")
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	const n = 20
	for i := range n {
		// A small receive buffer, set before the connection's window is.
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
		}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		path := []string{"/log/checkpoint", "/log/tile/0/000.p/1", "/healthz"}[i%3]
		req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")
		go func() {
			// Until the server stops reading (its writes block): 40,000
			// answers are far more than the socket buffers hold.
			c.SetWriteDeadline(time.Now().Add(time.Minute))
			c.Write(bytes.Repeat(req, 40000))
		}()
	}
	// A liveness bound, far above the write timeout (30 s).
	deadline := time.Now().Add(2 * time.Minute)
	for establishedTo(t, port) < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := establishedTo(t, port); got < n {
		t.Fatalf("%d of %d slow readers connected", got, n)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another client's GET /log/checkpoint: %s", resp.Status)
	}
	for establishedTo(t, port) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	if got := establishedTo(t, port); got > 0 {
		t.Errorf("%d of %d connections of clients that read no answers still open after 2 minutes", got, n)
	}
}

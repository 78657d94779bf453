// Package proctest helps tests that run real programs (an MCP server, a
// TSA, Rekor, Hydra, PostgreSQL, a second sidecar): a loopback port to
// give one, a wait until it listens, a buffer to collect what it prints
// while the test reads it, and a wait for what it does.
//
// It lives under log/ so that every package's tests, and every test
// helper, may import it (DESIGN §1). Test code only; nothing in the
// product imports it.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// FreePort returns a loopback TCP port that was free a moment ago. A
// program given it may still find it taken; tests that start one wait for
// it to answer, and say what it printed when it does not.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitFor waits until cond holds, checking it every 10 ms for a minute
// (a loaded machine is slow, and a deadline costs only when it fails);
// after that it fails the test, saying what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// WaitListening waits until something accepts TCP connections on addr:
// the program the test started there, called what. It gives the program a
// minute (a loaded machine starts node slowly); after that it fails the
// test, with what the program printed when out is not nil.
func WaitListening(t testing.TB, addr, what string, out fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			msg := ""
			if out != nil {
				msg = ": " + out.String()
			}
			t.Fatalf("%s did not listen on %s: %v%s", what, addr, err, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Buffer collects output written by one goroutine (a process's stdout,
// a logger) while others read it. The zero value keeps everything.
type Buffer struct {
	// Limit is how many bytes it keeps at most (what comes after is
	// dropped); 0 keeps all.
	Limit int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write keeps p, or what of it fits under the limit, and always reports
// all of p written, so a process is never stopped by a full buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := p
	if s.Limit > 0 {
		keep = p[:min(len(p), max(0, s.Limit-s.b.Len()))]
	}
	s.b.Write(keep)
	return len(p), nil
}

// String returns what it holds.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

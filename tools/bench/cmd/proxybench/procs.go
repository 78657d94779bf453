package main

// The child processes proxybench starts and stops.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child process proxybench started (or that a CommandTransport
// started from a Cmd proxybench made).
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     string    // stderr file
	prof    *profiler // nil unless -cpuprofile-dir
	owned   bool      // started by proxybench itself (it waits for it)
	done    chan struct{}
	stopped bool
}

func (b *bench) newProc(name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(b.c.dir, name+".log"), done: make(chan struct{})}
	if b.c.profDir != "" && bin == b.bin {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args = append(args, "--pprof", addr)
		p.prof = startProfiler(addr, filepath.Join(b.c.profDir, name+".pprof"), b.logf)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	p.cmd = cmd
	b.mu.Lock()
	b.procs = append(b.procs, p)
	b.mu.Unlock()
	return p, nil
}

// start starts a process proxybench owns (not one a CommandTransport runs).
func (p *proc) start() error {
	p.owned = true
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return nil
}

func (p *proc) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited says whether an owned process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends an owned process: SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	if p.prof != nil {
		p.prof.stop()
	}
	if !p.owned || p.stopped || p.cmd.Process == nil {
		return
	}
	p.stopped = true
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (b *bench) stopAll() {
	b.mu.Lock()
	ps := slices.Clone(b.procs)
	b.mu.Unlock()
	for _, p := range slices.Backward(ps) {
		p.stop()
	}
}

// logTail returns the last lines of a process's stderr, for errors.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHTTP waits until url answers (any status) or the process exits.
func waitHTTP(ctx context.Context, p *proc, url string, wantOK bool) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if !wantOK || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s exited before serving %s:\n%s", p.name, url, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve %s within 30 s:\n%s", p.name, url, p.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeConfig writes a provlog config with one downstream server.
func (b *bench) writeConfig(name, data string, server string) (string, error) {
	path := filepath.Join(b.c.dir, name+".yaml")
	cfg := fmt.Sprintf("data: %s\n", strconv.Quote(data))
	if b.c.commitDelay >= 0 {
		cfg += fmt.Sprintf("commit_delay: %s\n", b.c.commitDelay)
	}
	cfg += fmt.Sprintf("servers:\n  - id: %s\n%s", serverID, server)
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

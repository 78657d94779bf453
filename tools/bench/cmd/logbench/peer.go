package main

// The second sidecar of implPG2 and implPG2RTT, in a process of its own:
// the child re-executes itself with -phase=pgpeer, and the peer opens its
// own logpg store (its own connection pool, and its own delay proxy under
// -postgres-rtt) and sequencer on the run's schema, as a second provlog
// serve on the same database would. The child's appenders that go to the
// peer send it their entries over a Unix socket, one connection per
// appender, and get the receipt back: the socket's round trip (tens of
// microseconds) is in those appends' latency, as a client's call to a
// sidecar would be.
//
// Wire format, per request on a connection: a type byte, then
//
//	'a' u32 length, entry     → 0, u32 length, the receipt (tlog-proof text)
//	                            1, u32 length, the error's text
//	's'                       → 0, u32 length, server.Stats as JSON
//	'r' u32 length, peerRun   → 0, u32 length, peerRan as JSON
//	    as JSON                 1, u32 length, the error's text
//
// 'r' runs closed-loop appenders in the peer itself, calling its
// sequencer's Append as a sidecar's own proxy does: the throughput of two
// sidecars each with its appenders, the way a single sidecar's
// throughput is measured (its appenders in its process), without a
// socket round trip per append that the single sidecar does not pay.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/server"
)

const phasePeer = "pgpeer"

// sidecar is one sidecar of a PostgreSQL run: in this process, or a peer.
type sidecar interface {
	append(ctx context.Context, e []byte) (*log.Receipt, error)
	stats() (server.Stats, error)
}

type localSidecar struct{ seq *server.Sequencer }

func (l localSidecar) append(ctx context.Context, e []byte) (*log.Receipt, error) {
	return l.seq.Append(ctx, e)
}

func (l localSidecar) stats() (server.Stats, error) { return l.seq.Stats(), nil }

// peerSidecar is the client of a peer process.
type peerSidecar struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	sock  string
	conns chan *peerConn // idle connections
}

type peerConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// startPeer starts the peer process for sp (Postgres: the run's schema
// DSN, without any delay proxy) and waits until it serves.
func startPeer(sp spec) (*peerSidecar, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sp.Phase = phasePeer
	js, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-phase="+phasePeer)
	cmd.Env = append(os.Environ(), specEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "READY" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("peer sidecar did not start: %q %v", line, err)
	}
	return &peerSidecar{cmd: cmd, stdin: stdin, sock: peerSocket(sp.Dir), conns: make(chan *peerConn, 4096)}, nil
}

func peerSocket(dir string) string { return filepath.Join(dir, "peer.sock") }

func (p *peerSidecar) conn() (*peerConn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	default:
	}
	c, err := net.Dial("unix", p.sock)
	if err != nil {
		return nil, err
	}
	return &peerConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// call sends one request and reads its answer; the connection goes back
// to the pool unless it failed.
func (p *peerSidecar) call(typ byte, body []byte) ([]byte, error) {
	c, err := p.conn()
	if err != nil {
		return nil, err
	}
	c.w.WriteByte(typ)
	if typ == 'a' || typ == 'r' {
		binary.Write(c.w, binary.BigEndian, uint32(len(body)))
		c.w.Write(body)
	}
	status, b, err := func() (byte, []byte, error) {
		if err := c.w.Flush(); err != nil {
			return 0, nil, err
		}
		status, err := c.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		var n uint32
		if err := binary.Read(c.r, binary.BigEndian, &n); err != nil {
			return 0, nil, err
		}
		b := make([]byte, n)
		_, err = io.ReadFull(c.r, b)
		return status, b, err
	}()
	if err != nil {
		c.c.Close()
		return nil, fmt.Errorf("peer sidecar: %w", err)
	}
	p.conns <- c
	if status != 0 {
		return nil, fmt.Errorf("peer sidecar: %s", b)
	}
	return b, nil
}

func (p *peerSidecar) append(ctx context.Context, e []byte) (*log.Receipt, error) {
	b, err := p.call('a', e)
	if err != nil {
		return nil, err
	}
	return log.ParseReceipt(b)
}

// peerRun asks the peer to append N entries (makeEntry(Base+i)) with
// Appenders closed-loop appenders of its own, stopping at MaxTime.
type peerRun struct {
	Appenders, N int
	Base         uint64
	MaxTime      time.Duration
}

// peerRan is what a peerRun did.
type peerRan struct {
	Count   int
	Elapsed time.Duration
}

// run has the peer's own appenders append (peerRun).
func (p *peerSidecar) run(r peerRun) (peerRan, error) {
	var ran peerRan
	js, err := json.Marshal(r)
	if err != nil {
		return ran, err
	}
	b, err := p.call('r', js)
	if err != nil {
		return ran, err
	}
	return ran, json.Unmarshal(b, &ran)
}

func (p *peerSidecar) stats() (server.Stats, error) {
	var st server.Stats
	b, err := p.call('s', nil)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// close stops the peer: it closes its sidecar when its stdin closes.
func (p *peerSidecar) close() error {
	for {
		select {
		case c := <-p.conns:
			c.c.Close()
			continue
		default:
		}
		break
	}
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		return errors.New("peer sidecar did not stop within a minute")
	}
}

// runPeer is the peer process: a logpg store and sequencer on the run's
// schema, serving appends on its socket until stdin closes.
func runPeer(sp spec, signer note.Signer, verifier note.Verifier) error {
	ctx := context.Background()
	dsn := sp.Postgres
	if sp.PostgresRTT > 0 {
		d, proxy, err := viaDelay(dsn, sp.PostgresRTT)
		if err != nil {
			return err
		}
		defer proxy.close()
		dsn = d
	}
	st, err := logpg.Open(ctx, dsn, nil)
	if err != nil {
		return fmt.Errorf("peer: logpg.Open: %w", err)
	}
	defer st.Close()
	seq, err := server.OpenSequencer(ctx, st, signer, verifier, nil)
	if err != nil {
		return fmt.Errorf("peer: OpenSequencer: %w", err)
	}
	defer seq.Close()
	ln, err := net.Listen("unix", peerSocket(sp.Dir))
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	fmt.Println("READY")
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil // stdin closed
		}
		go servePeerConn(ctx, c, seq)
	}
}

func servePeerConn(ctx context.Context, c net.Conn, seq *server.Sequencer) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	answer := func(status byte, b []byte) error {
		w.WriteByte(status)
		binary.Write(w, binary.BigEndian, uint32(len(b)))
		w.Write(b)
		return w.Flush()
	}
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return
		}
		switch typ {
		case 'a', 'r':
			var n uint32
			if err := binary.Read(r, binary.BigEndian, &n); err != nil {
				return
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			var b []byte
			if typ == 'a' {
				var rc *log.Receipt
				if rc, err = seq.Append(ctx, body); err == nil {
					b = []byte(rc.String())
				}
			} else {
				b, err = runPeerAppenders(ctx, seq, body)
			}
			if err != nil {
				err = answer(1, []byte(err.Error()))
			} else {
				err = answer(0, b)
			}
			if err != nil {
				return
			}
		case 's':
			b, _ := json.Marshal(seq.Stats())
			if answer(0, b) != nil {
				return
			}
		default:
			return
		}
	}
}

// runPeerAppenders serves a peerRun (JSON in js) with seq and returns
// its peerRan as JSON.
func runPeerAppenders(ctx context.Context, seq *server.Sequencer, js []byte) ([]byte, error) {
	var r peerRun
	if err := json.Unmarshal(js, &r); err != nil {
		return nil, err
	}
	deadline := time.Time{}
	if r.MaxTime > 0 {
		deadline = time.Now().Add(r.MaxTime)
	}
	n, el, err := runLoop(r.Appenders, r.N, deadline, func(i uint64) error {
		_, err := seq.Append(ctx, makeEntry(r.Base+i))
		return err
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(peerRan{Count: n, Elapsed: el})
}

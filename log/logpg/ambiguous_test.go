package logpg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// cutProxy is a TCP proxy between stores and PostgreSQL that cuts a
// connection as a middlebox or a broken network does: the commit's
// pipeline has left the client, the client's side of the connection
// fails, and the bytes reach the server only later (release).
type cutProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	armed uint32         // the backend pid whose next pipeline is held
	held  chan *proxied  // a connection whose pipeline is held
	all   sync.WaitGroup // the connections' goroutines
}

// proxied is one connection through the proxy.
type proxied struct {
	client, server net.Conn
	pid            uint32 // the backend's, once the server said it
	pending        []byte // the held pipeline
	gone           chan struct{}
}

// newCutProxy starts a proxy to the server of dsn and returns it with a
// DSN that connects through it.
func newCutProxy(t *testing.T, dsn string) (*cutProxy, string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: u.Host, held: make(chan *proxied, 1)}
	t.Cleanup(func() { ln.Close(); p.all.Wait() })
	go p.accept()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxied{client: c, server: s, gone: make(chan struct{})}
		p.all.Add(2)
		go p.down(pc)
		go p.up(pc)
	}
}

// down copies the server's bytes to the client, learning the backend's
// pid from its BackendKeyData message ('K', length 12, pid, secret), and
// goes on reading after the client side is cut, until the server closes.
func (p *cutProxy) down(pc *proxied) {
	defer p.all.Done()
	defer close(pc.gone)
	defer pc.client.Close()
	var seen []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if pc.pid == 0 && len(seen) < 4096 {
				seen = append(seen, buf[:n]...)
				if i := bytes.Index(seen, []byte{'K', 0, 0, 0, 12}); i >= 0 && len(seen) >= i+9 {
					pc.pid = binary.BigEndian.Uint32(seen[i+5:])
				}
			}
			p.mu.Unlock()
			pc.client.Write(buf[:n]) // fails once cut; the server is read on
		}
		if err != nil {
			return
		}
	}
}

// up copies the client's bytes to the server, except the pipeline of the
// armed backend: that is held, whole (up to its closing Sync message), and
// the client's side is cut.
func (p *cutProxy) up(pc *proxied) {
	defer p.all.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hold := pc.pid != 0 && pc.pid == p.armed
			p.mu.Unlock()
			if hold {
				pc.pending = append(pc.pending, buf[:n]...)
				if bytes.HasSuffix(pc.pending, []byte{'S', 0, 0, 0, 4}) {
					p.mu.Lock()
					p.armed = 0
					p.mu.Unlock()
					pc.client.Close()
					p.held <- pc
					return
				}
				continue
			}
			pc.server.Write(buf[:n])
		}
		if err != nil {
			pc.server.(*net.TCPConn).CloseWrite()
			return
		}
	}
}

// arm holds the next pipeline the backend pid is sent.
func (p *cutProxy) arm(pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = pid
}

// release delivers the held pipeline to the server, as the network would
// at last, ends the connection, and waits until the server has closed it.
func (p *cutProxy) release() {
	pc := <-p.held
	pc.server.Write(pc.pending)
	pc.server.(*net.TCPConn).CloseWrite()
	<-pc.gone
}

// TestAmbiguousCommitDelivered: the connection fails after a commit's
// pipeline (BEGIN … COMMIT) has left the client, but the pipeline reaches
// the server only after the handle has read the outcome back, as through
// a proxy whose client side broke. The read-back must not find "not
// committed" and then see the batch committed: whatever the commit
// answered holds in the log the server ends with.
func TestAmbiguousCommitDelivered(t *testing.T) {
	for _, trips := range []int{1, 2} {
		t.Run(fmt.Sprintf("trips=%d", trips), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			proxy, via := newCutProxy(t, dsn)
			s, other := open(t, via), open(t, dsn)
			defer s.Close()
			defer other.Close()
			s.testingOnlyTrips = trips
			commitShared(t, s, "before", 2)
			commitShared(t, s, "warm", 1) // the connection has its statements prepared

			s.testingOnlyBeforeWrite = proxy.arm
			var sent log.State
			err := s.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
				b := buildOn(t, st, "cut", 3)
				sent = b.State
				return b, nil
			})
			s.testingOnlyBeforeWrite = nil
			proxy.release()

			st, lerr := other.Latest(t.Context())
			if lerr != nil {
				t.Fatal(lerr)
			}
			in := st.Size >= sent.Size && pgtest.Psql(t, dsn, fmt.Sprintf(`SELECT count(*) FROM provlog_checkpoints WHERE size = %d AND note = '\x%x'`, sent.Size, sent.Checkpoint)) == "1"
			switch {
			case err == nil && !in:
				t.Fatalf("the commit answered success, but its batch is not in the log (size %d)", st.Size)
			case err != nil && in:
				t.Fatalf("the commit answered %v, but its batch [%d, %d) was committed after the read-back", err, 3, sent.Size)
			case err != nil && !errors.Is(err, log.ErrUnavailable):
				t.Fatalf("the commit answered %v, want ErrUnavailable (nothing written)", err)
			}
			t.Logf("commit: %v; log size %d", err, st.Size)
			// Both handles go on, on one history.
			commitShared(t, s, "after", 1)
			commitShared(t, other, "other", 1)
			if _, err := s.Latest(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The supervisor: one downstream server's connection (and a stdio
// server's process) from the first connect to the proxy's close,
// restarted with backoff whenever it is lost, and the state that
// provlog__status and /healthz report.

// Health states of a downstream server, as provlog__status reports them.
const (
	StateStarting = "starting" // first connection under way
	StateUp       = "up"
	StateDown     = "down" // crashed or unreachable; being restarted with backoff
	StateStopped  = "stopped"
)

const (
	connectTimeout   = 30 * time.Second
	terminateTimeout = 2 * time.Second
	// stableAfter is how long a session must last for the restart backoff
	// to start over.
	stableAfter = 30 * time.Second
	// The restart backoff doubles from minBackoff up to maxBackoff.
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// A supervisor keeps one downstream server connected.
type supervisor struct {
	id     string // the server's
	logger *slog.Logger
	// dial opens a session (starting a stdio server's process).
	dial func(context.Context) (*mcp.ClientSession, *process, error)
	// up readies a new session before it counts as connected: the lists
	// are read and subscriptions renewed.
	up func(context.Context, *mcp.ClientSession)
	// scrub is the server's scrubber of the texts it made (recentSecrets):
	// why a session could not start or ended may quote what the server
	// sent, and goes to the proxy's log and to provlog__status.
	scrub func(string) string

	firstDone chan struct{} // closed once the first connection attempt is over
	firstOnce sync.Once

	mu       sync.Mutex
	cs       *mcp.ClientSession // nil while down
	cmd      *process           // the running process (stdio servers)
	state    string
	lastErr  string
	restarts int
	since    time.Time
	// ended is a session whose connection failed (ending): it is no use
	// any more, though it is cs until it is closed. restarting is set
	// from then, or from a session's end, until the next connection
	// attempt is over; changed is closed (and made anew) when either
	// changes, for await.
	ended      *mcp.ClientSession
	restarting bool
	changed    chan struct{}
	// renew says the server forgot the session that ended (renewing):
	// the next one is started at once, as MCP's client starts a new
	// session then, not after the backoff of a server that crashed.
	renew bool
}

func newSupervisor(id string, logger *slog.Logger, dial func(context.Context) (*mcp.ClientSession, *process, error), up func(context.Context, *mcp.ClientSession), scrub func(string) string) *supervisor {
	return &supervisor{id: id, logger: logger, dial: dial, up: up, scrub: scrub,
		firstDone: make(chan struct{}), state: StateStarting, since: time.Now(), changed: make(chan struct{})}
}

// run connects, serves, and reconnects with backoff until ctx is done.
func (s *supervisor) run(ctx context.Context) {
	defer s.firstOver()
	backoff := minBackoff
	for ctx.Err() == nil {
		cs, cmd, err := s.dial(ctx)
		if err != nil {
			// A restart's error may quote what the calls before it sent
			// the server; before the first call no redacted value is
			// known, and scrub leaves the first start's as it is.
			why := s.scrub(err.Error())
			s.setDown("connecting: " + why)
			s.restarted()
			if errors.Is(err, errNoNewerRevision) {
				s.logger.Info("proxy: downstream server speaks no newer revision; its one session serves every client", "server", s.id, "answer", why)
				break
			}
			s.logger.Warn("proxy: downstream server failed to start", "server", s.id, "error", why, "retry_in", backoff)
		} else {
			up := time.Now()
			s.mu.Lock()
			s.cs, s.cmd, s.state, s.lastErr, s.since = cs, cmd, StateUp, "", up
			s.mu.Unlock()
			s.logger.Info("proxy: downstream server connected", "server", s.id, "server_info", serverInfo(cs))
			msg := s.serve(ctx, cs, cmd)
			if ctx.Err() != nil {
				break
			}
			if time.Since(up) > stableAfter {
				backoff = minBackoff
			}
			s.setDown(msg)
			s.mu.Lock()
			s.restarting = true
			renew := s.renew
			if renew {
				s.renew = false
				s.restarts++
			}
			s.mu.Unlock()
			if renew {
				s.logger.Info("proxy: downstream server forgot the session; starting a new one", "server", s.id)
				continue
			}
			s.logger.Warn("proxy: downstream server went down; restarting", "server", s.id, "error", msg, "retry_in", backoff)
		}
		s.firstOver()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.state, s.since = StateStopped, time.Now()
	s.mu.Unlock()
	s.restarted()
}

// ending notes that cs's connection failed: calls wait for the restart
// (await) rather than being sent on it while it is closed (a stdio
// server is given terminateTimeout to exit), to fail there.
func (s *supervisor) ending(cs *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = cs
	if cs == s.cs {
		s.restarting = true
		s.wake()
	}
}

// renewing notes that the server no longer knows cs, which the caller
// closes (HTTP 404 for the session): as ending, and the next session is
// started at once.
func (s *supervisor) renewing(cs *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = cs
	if cs == s.cs {
		s.restarting, s.renew = true, true
		s.wake()
	}
}

// restarted notes that a connection attempt is over (or the supervisor
// stopped): calls wait no more.
func (s *supervisor) restarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarting = false
	s.wake()
}

func (s *supervisor) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// await returns the current session, as session does, but while the last
// one is ending or lost and the server is being restarted it waits for
// the next, its lists read (serve), for ctx, or for timeout (the call's),
// whichever ends first: a call's entry names the definition its session
// listed.
// Its timer is made only when it waits: a call that finds the session
// up costs no timer.
func (s *supervisor) await(ctx context.Context, timeout time.Duration) (*mcp.ClientSession, error) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		s.mu.Lock()
		cs, waiting, changed := s.cs, s.restarting, s.changed
		if cs == s.ended {
			cs = nil
		}
		s.mu.Unlock()
		switch {
		case cs != nil && !waiting:
			return cs, nil
		case !waiting:
			return s.session()
		}
		if t == nil {
			t = time.NewTimer(timeout)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, s.notRestarted()
		case <-t.C:
			return nil, s.notRestarted()
		}
	}
}

func (s *supervisor) notRestarted() error {
	return fmt.Errorf("server %q is not connected: its connection ended, and it was not restarted within the call's timeout", s.id)
}

// serve readies a new session, marks the first connection done, and waits
// for the session to end; it returns why it ended.
func (s *supervisor) serve(ctx context.Context, cs *mcp.ClientSession, cmd *process) string {
	// Closing the proxy ends the session whatever run is doing.
	unwatch := context.AfterFunc(ctx, func() { cs.Close() })
	s.up(ctx, cs)
	s.restarted()
	s.firstOver()
	werr := cs.Wait()
	unwatch()
	s.mu.Lock()
	s.cs, s.cmd = nil, nil
	s.mu.Unlock()
	cs.Close()
	endProcess(cmd)
	if werr != nil {
		// A read error may quote the server's own bytes (a frame's
		// version tag, say), which may hold what a call sent it.
		return "connection lost: " + s.scrub(werr.Error())
	}
	return "the server closed the connection"
}

// firstOver marks the first connection attempt over, for New's wait.
func (s *supervisor) firstOver() { s.firstOnce.Do(func() { close(s.firstDone) }) }

func (s *supervisor) setDown(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.lastErr, s.since = StateDown, msg, time.Now()
}

// stop closes the current session, which stops a stdio server's process.
func (s *supervisor) stop() {
	s.mu.Lock()
	cs, cmd := s.cs, s.cmd
	s.mu.Unlock()
	if cs != nil {
		cs.Close()
	}
	killProcessGroup(cmd)
}

// session returns the current session, or an error saying why there is
// none.
func (s *supervisor) session() (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != nil {
		return s.cs, nil
	}
	why := s.state
	if s.lastErr != "" {
		why += ": " + s.lastErr
	}
	return nil, fmt.Errorf("server %q is not connected (%s)", s.id, why)
}

// current returns the current session, nil while down.
func (s *supervisor) current() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

// A connState is what a supervisor reports of its server.
type connState struct {
	state    string // StateStarting, StateUp, StateDown or StateStopped
	lastErr  string
	since    time.Time
	restarts int
	init     *mcp.InitializeResult // the current session's (nil while down)
	pid      int                   // a running stdio server's process (0: none)
}

func (s *supervisor) status() connState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := connState{state: s.state, lastErr: s.lastErr, since: s.since, restarts: s.restarts}
	if s.cs != nil {
		st.init = s.cs.InitializeResult()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		st.pid = s.cmd.Process.Pid
	}
	return st
}

func serverInfo(cs *mcp.ClientSession) string {
	if r := cs.InitializeResult(); r != nil && r.ServerInfo != nil {
		return r.ServerInfo.Name + " " + r.ServerInfo.Version
	}
	return ""
}

package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// How a front HTTP session is closed: by the reaper when idle, or by its
// client's DELETE; and how the front admits no request of it from then
// on, though the proxy forgets it only later (sessionInitialized).

// The parts of frontSession.use. One word holds them so that one atomic
// operation orders a POST's admission against the session's closing: the
// reaper closes a session only if no POST is in progress and none was
// admitted since it looked (reapIdle), and no POST is admitted once the
// session is closed, though the SDK's session ends, and the proxy forgets
// it, only later (sessionInitialized's goroutine). Else a tools/call in
// that window would be recorded and forwarded on a closed session, and
// one admitted as the reaper decided would be cut off mid-call.
const (
	useActive   = 1<<31 - 1 // bits 0-30: POSTs in progress
	useClosed   = 1 << 31   // closed: by the reaper, a DELETE, or the SDK
	useAdmitted = 1 << 32   // bits 32-63: POSTs ever admitted (wrapping)
)

// admit counts a POST of the session in progress and reports true, or
// reports false if the session is closed, whose POSTs are answered as
// an unknown session's. A true admit is ended by release.
func (fs *frontSession) admit() bool {
	if fs.use.Add(useAdmitted+1)&useClosed != 0 {
		fs.use.Add(^uint64(0)) // one less in progress
		return false
	}
	return true
}

// release ends a POST that admit let in.
func (fs *frontSession) release() {
	fs.touch()
	fs.use.Add(^uint64(0))
}

// closed reports whether the session was closed: its requests are
// answered as an unknown session's, even before the proxy forgets it.
func (fs *frontSession) closed() bool { return fs.use.Load()&useClosed != 0 }

// markClosed admits no more POSTs of the session; those in progress go on.
func (fs *frontSession) markClosed() { fs.use.Or(useClosed) }

// reapIdle marks the session closed and reports true if, as of now, no
// POST is in progress and the last request started or ended longer than
// idle ago. A POST admitted at any moment after the first look (even one
// over by the time of the last) leaves the session open: it was not idle.
// A session marked closed already is reported as the clock says: a
// DELETE the SDK refused (an unsupported Mcp-Protocol-Version) marked it
// and did not end the SDK's, which the reaper then closes. beforeClose,
// if not nil, runs between the decision and the marking
// (testingOnlyBeforeReap).
func (fs *frontSession) reapIdle(now time.Time, idle time.Duration, beforeClose func()) bool {
	u := fs.use.Load()
	if u&useActive != 0 {
		return false
	}
	// Read after use: a POST counted out before that load had touched the
	// clock already (release).
	if now.Sub(time.Unix(0, fs.lastUsed.Load())) <= idle {
		return false
	}
	if u&useClosed != 0 {
		return true // no POST is admitted: closing it again cuts off none
	}
	if beforeClose != nil {
		beforeClose()
	}
	return fs.use.CompareAndSwap(u, u|useClosed)
}

// actorOf reports whether r is of the session's actor.
func (fs *frontSession) actorOf(r *http.Request) bool {
	ti := auth.TokenInfoFromContext(r.Context())
	return ti != nil && ti.UserID == fs.actor
}

// writeSessionNotFound answers a request of a closed session as the SDK
// answers one of a session it does not know (404, which the streamable
// HTTP transport prescribes for a terminated session).
func writeSessionNotFound(w http.ResponseWriter) {
	http.Error(w, "session not found", http.StatusNotFound)
}

// reapSessions closes front HTTP sessions idle for longer than idle, every
// interval, until ctx is done. The SDK's own idle timer cannot be used: it
// does not see the requests the fast path serves.
func (p *Proxy) reapSessions(ctx context.Context, interval, idle time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	firstSeen := map[*mcp.ServerSession]time.Time{} // sessions never initialized
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.reapPass(time.Now(), idle, firstSeen)
	}
}

// reapPass is one pass of reapSessions as of now. It takes now rather
// than reading the clock so that a test can hold sessions to the idle
// limit without waiting it out (the scheduler of a loaded machine would
// decide such a test). firstSeen carries, from pass to pass, when a session
// that never initialized was first seen.
func (p *Proxy) reapPass(now time.Time, idle time.Duration, firstSeen map[*mcp.ServerSession]time.Time) {
	seen := map[*mcp.ServerSession]bool{}
	for ss := range p.server.Sessions() {
		id := ss.ID()
		if id == "" {
			continue // stdio, in memory, stateless
		}
		seen[ss] = true
		if v, ok := p.sessions.Load(id); ok {
			fs := v.(*frontSession)
			if fs.reapIdle(now, idle, p.testingOnlyBeforeReap) {
				p.logger.Info("proxy: closing an idle HTTP session", "actor", fs.actor, "session", id, "idle", idle)
				ss.Close()
			}
			continue
		}
		if _, ok := firstSeen[ss]; !ok {
			firstSeen[ss] = now
		} else if now.Sub(firstSeen[ss]) > idle {
			ss.Close()
		}
	}
	for ss := range firstSeen {
		if !seen[ss] {
			delete(firstSeen, ss)
		}
	}
}

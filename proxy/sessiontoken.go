package proxy

import (
	"context"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/provlog/provlog/proxy/authn"
)

// An HTTP session lasts no longer than the OAuth token its client last
// sent on it: every request is authenticated, but a session's standalone
// stream, its calls under way and its place among the actor's sessions
// would outlive a revoked or expired token by up to sessions.idle. So the
// token is checked again (authn.Authenticator.Holds: a JWT until its exp
// and the clock skew, an introspected token as its issuer says, asked
// again at most every recheck of its issuer, 30 s by default) every sessionRecheck, and a session
// whose token no longer holds is closed as an idle one is; while no
// issuer is configured (a reload may add one) nothing is checked and
// nothing wakes. Static tokens are the config's: a reload that drops one
// ends its requests, not this.

// sessionRecheck is how often sessions' tokens are checked again (most
// checks are a lookup among the tokens validated lately).
const sessionRecheck = time.Second

// sessionCred is the OAuth token a session's client last sent on it, kept
// in memory to check again; it is never logged.
type sessionCred struct{ token string }

// noteCredential notes r's token as its session's newest, if r is of a
// session of id's actor and the token is an OAuth one.
func (p *Proxy) noteCredential(r *http.Request, id *authn.Identity) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" || id == nil || id.Static {
		return
	}
	v, ok := p.sessions.Load(sid)
	if !ok {
		return
	}
	fs := v.(*frontSession)
	if fs.actor != id.Actor {
		return
	}
	tok, _, err := authn.Token(r.Header)
	if err != nil || tok == "" {
		return
	}
	if c := fs.cred.Load(); c == nil || subtle.ConstantTimeCompare([]byte(c.token), []byte(tok)) != 1 {
		fs.cred.Store(&sessionCred{token: tok})
	}
}

// recheckSessions closes, every interval until ctx is done, the HTTP
// sessions whose token no longer holds. While no OAuth issuer is
// configured no session holds an OAuth token, so it waits for a reload
// that adds one.
func (p *Proxy) recheckSessions(ctx context.Context, a *authn.Authenticator, interval time.Duration) {
	for {
		issuers, changed := a.Watch()
		if !issuers {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		if !p.recheckUntil(ctx, a, interval, changed) {
			return
		}
	}
}

// recheckUntil checks sessions again every interval until ctx is done
// (false) or changed is closed (true).
func (p *Proxy) recheckUntil(ctx context.Context, a *authn.Authenticator, interval time.Duration, changed <-chan struct{}) bool {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			return true
		case <-t.C:
		}
		p.recheckRounds.Add(1)
		p.sessions.Range(func(k, v any) bool {
			fs := v.(*frontSession)
			c := fs.cred.Load()
			if c == nil || fs.closed() || a.Holds(ctx, c.token) {
				return true
			}
			fs.markClosed()
			p.logger.Info("proxy: closing an HTTP session: its token no longer holds (expired, revoked, or its issuer no longer trusted)", "actor", fs.actor, "session", k)
			fs.ss.Close()
			return true
		})
	}
}

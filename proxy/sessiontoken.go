package proxy

import (
	"context"
	"crypto/subtle"
	"net/http"
	"sync"
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

// recheckParallel bounds how many of one issuer's sessions are checked
// at once. Issuers are checked side by side, each in its own rounds: a
// hanging one (each check waits up to authn.IssuerTimeout) delays its own
// sessions' checks only, and its next round starts once its last ended.
// It is below the authenticator's own bound on calls awaiting one
// issuer's introspection answers (16).
const recheckParallel = 8

// sessionCred is the OAuth token a session's client last sent on it, kept
// in memory to check again (it is never logged), and its issuer's iss.
type sessionCred struct{ token, issuer string }

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
		var iss string
		if id.Auth != nil {
			iss = id.Auth.Issuer
		}
		fs.cred.Store(&sessionCred{token: tok, issuer: iss})
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
	var mu sync.Mutex
	busy := map[string]bool{} // issuers whose last round is under way
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			return true
		case <-t.C:
		}
		p.recheckRounds.Add(1)
		byIssuer := map[string][]*frontSession{}
		p.sessions.Range(func(_, v any) bool {
			fs := v.(*frontSession)
			if c := fs.cred.Load(); c != nil && !fs.closed() {
				byIssuer[c.issuer] = append(byIssuer[c.issuer], fs)
			}
			return true
		})
		for iss, fss := range byIssuer {
			mu.Lock()
			if busy[iss] {
				mu.Unlock()
				continue
			}
			busy[iss] = true
			mu.Unlock()
			p.wg.Go(func() {
				p.recheckIssuer(ctx, a, fss)
				mu.Lock()
				delete(busy, iss)
				mu.Unlock()
			})
		}
	}
}

// recheckIssuer checks the sessions of one issuer's tokens,
// recheckParallel at a time, and closes those whose token no longer
// holds.
func (p *Proxy) recheckIssuer(ctx context.Context, a *authn.Authenticator, fss []*frontSession) {
	sem := make(chan struct{}, recheckParallel)
	var wg sync.WaitGroup
	for _, fs := range fss {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c := fs.cred.Load()
			if c == nil || fs.closed() || a.Holds(ctx, c.token, c.issuer) {
				return
			}
			fs.markClosed()
			p.logger.Info("proxy: closing an HTTP session: its token no longer holds (expired, revoked, or its issuer no longer trusted)", "actor", fs.actor, "session", fs.ss.ID())
			fs.ss.Close()
		})
	}
	wg.Wait()
}

package authn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/provlog/provlog/log"
)

// introspectToken checks a token by introspection: with issuer is alone,
// or with each issuer in turn when is is nil (introspect). A token refused
// lately is refused again without asking (refused), so that one made-up
// token sent again and again costs one call per refusedTTL.
func (st *state) introspectToken(ctx context.Context, is *issuer, token string, sum [sha256.Size]byte, now time.Time) (*Identity, error) {
	if err := st.refused.get(sum, now); err != nil {
		return nil, err
	}
	var id *Identity
	var err error
	if is != nil {
		id, _, err = st.introspectAt(ctx, is, token, sum, now)
	} else {
		id, err = st.introspect(ctx, token, sum, now)
	}
	if err != nil {
		st.refused.put(sum, err, now)
	}
	return id, err
}

// introspect asks the configured introspection endpoints about an opaque
// token (RFC 7662), all at once, and maps the first active answer to an
// identity: an endpoint that hangs delays no other issuer's tokens. Only
// a token that names no issuer is offered around so: one that names a
// trusted issuer goes to that issuer alone (introspectAt), as every other
// issuer would learn it, and could replay it, by being asked. Without an
// active answer, the token is refused (401) only when every endpoint
// answered; when one could not be asked it might have vouched for the
// token, so no one can tell: 503.
func (st *state) introspect(ctx context.Context, token string, sum [sha256.Size]byte, now time.Time) (*Identity, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		id  *Identity
		err error
		// final: the endpoint vouched for the token, which failed the
		// checks (another issuer's vouching for it would be odd)
		final bool
	}
	answers := make(chan answer)
	asked := 0
	for _, is := range st.issuers {
		if is.cfg.Introspection == nil {
			continue
		}
		asked++
		go func() {
			id, others, err := st.introspectAt(ctx, is, token, sum, now)
			answers <- answer{id, err, !others}
		}()
	}
	if asked == 0 {
		return nil, invalid("unknown bearer token (not a static token, not a JWT of a trusted issuer, and no introspection endpoint is configured)")
	}
	var refusal, undecided error
	for got := 1; got <= asked; got++ {
		a := <-answers
		switch status := errStatus(a.err); {
		case a.err == nil:
			cancel()
			for ; got < asked; got++ {
				<-answers // the others' calls were cut off: they end at once
			}
			return a.id, nil
		case status != http.StatusUnauthorized:
			undecided = a.err
		case a.final || refusal == nil:
			refusal = a.err
		}
	}
	if undecided != nil {
		return nil, undecided
	}
	return nil, refusal
}

// errStatus returns the status of an [*Error], or 0.
func errStatus(err error) int {
	if e, ok := err.(*Error); ok {
		return e.Status
	}
	return 0
}

// introspectAt asks issuer is's introspection endpoint about a token and
// maps an active answer to an identity, held to the same checks as a
// JWT's claims. others is true when another issuer may still vouch for
// the token: this one's endpoint failed or does not know it.
func (st *state) introspectAt(ctx context.Context, is *issuer, token string, sum [sha256.Size]byte, now time.Time) (id *Identity, others bool, err error) {
	if is.cfg.Introspection == nil {
		return nil, false, invalid("issuer %s has no introspection endpoint, and the token is no JWT of its", is.cfg.Issuer)
	}
	c, err := is.introspection(ctx, token, now)
	if err != nil {
		return nil, true, err
	}
	if c.Active == nil || !*c.Active {
		return nil, true, invalid("the token is not active (issuer %s)", is.cfg.Issuer)
	}
	if c.Iss == "" {
		c.Iss = is.cfg.Issuer // RFC 7662 makes iss optional: the endpoint speaks for its issuer
	}
	id, err = st.identity(is, c, sum, now, log.AuthViaIntrospection)
	if err != nil {
		return nil, false, err
	}
	// Trusted for the issuer's recheck without asking again: a revoked
	// token stops working within it.
	ttl := is.cfg.Recheck
	if ttl == 0 {
		ttl = DefaultRecheck // a config that skipped Check
	}
	id.until = now.Add(ttl)
	return id, false, nil
}

// introspection posts the token to the issuer's endpoint.
func (is *issuer) introspection(ctx context.Context, token string, now time.Time) (*claims, error) {
	endpoint := is.introspectURL(ctx, now)
	if endpoint == "" {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: "invalid_token",
			Description: fmt.Sprintf("issuer %s's introspection endpoint is not known yet (its discovery document could not be fetched)", is.cfg.Issuer)}
	}
	src, _ := ctx.Value(sourceKey{}).(string)
	if !is.takeIntrospection(now, src) {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: "invalid_token",
			Description: fmt.Sprintf("issuer %s's introspection endpoint is asked too often now (from here or overall); try again later", is.cfg.Issuer)}
	}
	defer is.doneIntrospection(src)
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	in := is.cfg.Introspection
	// RFC 6749 §2.3.1: client credentials form-encoded, then Basic.
	req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(in.ClientSecret))
	resp, err := is.a.opts.HTTPClient.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			// Another issuer vouched for the token, or the client left:
			// nothing the operator need hear of.
			return nil, &Error{Status: http.StatusServiceUnavailable, Code: "invalid_token", Description: "the token's check was cut off"}
		}
		return nil, is.unavailable("introspection", fetchErr(endpoint, err))
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := decodeAnswer(resp, endpoint, &raw); err != nil {
		return nil, is.unavailable("introspection", err)
	}
	return parseClaims(raw)
}

// Bounds on one issuer's introspection calls, as jwks_min_refresh bounds
// its key-set fetches: every request with a bearer token no one has seen
// costs a call, credentials and all, so anyone who can reach the sidecar
// could otherwise make it hammer the issuer, and a slow issuer would tie
// up a goroutine and a connection per request. Beyond them the request is
// answered 503. A sidecar whose clients hold 100 tokens needs some 3
// calls a second (each answer is trusted for its issuer's recheck, 30s by default). Each source
// address (an IPv6 one by its /64) may use half of them at most, so that
// a flood of made-up tokens from one place leaves the rest to everyone
// else's new tokens.
var (
	introspectIssuer = limit{rate: 20, burst: 40, inFlight: 16}
	introspectSource = limit{rate: 10, burst: 20, inFlight: 8}
)

// maxSources bounds the sources an issuer keeps a bucket for; when full,
// it starts again empty.
const maxSources = 4096

// A limit is a token bucket's rate (calls a second, sustained), burst
// (calls at once after a quiet spell) and the calls that may await
// answers.
type limit struct {
	rate, burst float64
	inFlight    int
}

// bucket is one token bucket under a limit.
type bucket struct {
	tokens float64
	last   time.Time
	busy   int
}

// refill brings b's tokens to now and reports whether a call may start.
func (b *bucket) refill(l limit, now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = l.burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(l.burst, b.tokens+d.Seconds()*l.rate)
	}
	b.last = now
	return b.tokens >= 1 && b.busy < l.inFlight
}

func (b *bucket) take() { b.tokens--; b.busy++ }

// takeIntrospection reports whether a call to the issuer's introspection
// endpoint may be made at now for a request from src ("": unknown, held
// to the issuer's bound alone); if so, doneIntrospection must follow.
func (is *issuer) takeIntrospection(now time.Time, src string) bool {
	is.introMu.Lock()
	defer is.introMu.Unlock()
	var sb *bucket
	if src != "" {
		if is.introSources == nil || len(is.introSources) >= maxSources {
			is.introSources = map[string]*bucket{}
		}
		if sb = is.introSources[src]; sb == nil {
			sb = &bucket{}
			is.introSources[src] = sb
		}
		if !sb.refill(introspectSource, now) {
			return false
		}
	}
	if !is.intro.refill(introspectIssuer, now) {
		return false
	}
	is.intro.take()
	if sb != nil {
		sb.take()
	}
	return true
}

func (is *issuer) doneIntrospection(src string) {
	is.introMu.Lock()
	is.intro.busy--
	if sb := is.introSources[src]; sb != nil && sb.busy > 0 {
		sb.busy--
	}
	is.introMu.Unlock()
}

// sourceKey is the context key of a request's source (Request sets it).
type sourceKey struct{}

// introspectURL returns the endpoint, discovering it if need be.
func (is *issuer) introspectURL(ctx context.Context, now time.Time) string {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.introspect == "" {
		if err := is.discover(ctx, now); err != nil {
			is.a.opts.Logger.Warn("authn: discovering an issuer's introspection endpoint failed", "issuer", is.cfg.Issuer, "err", err)
		}
	}
	return is.introspect
}

// unavailable logs why the issuer's endpoint (what) failed, for the
// operator, and returns the fixed answer a client gets: the details name
// the issuer's internal endpoints, and whoever sends any token at all
// would read them.
func (is *issuer) unavailable(what string, err error) *Error {
	is.a.opts.Logger.Warn("authn: an issuer's "+what+" failed", "issuer", is.cfg.Issuer, "err", err)
	return &Error{Status: http.StatusServiceUnavailable, Code: "invalid_token",
		Description: fmt.Sprintf("issuer %s's %s failed, so the token cannot be checked now; try again later", is.cfg.Issuer, what)}
}

// fetchErr is the error of a request to endpoint that got no answer, naming
// the URL redacted: net/http's errors repeat it whole, query and all.
func fetchErr(endpoint string, err error) error {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return fmt.Errorf("%s: %w", log.RedactURL(endpoint), err)
}

// validated remembers tokens already validated, by SHA-256, until they
// expire (or, for introspected tokens, for their issuer's recheck), so that a
// client's next calls need no signature check or round trip. It holds at
// most maxValidated tokens; when full, it starts again empty.
type validated struct {
	mu sync.RWMutex
	m  map[[sha256.Size]byte]*Identity
}

const maxValidated = 4096

func newValidated() *validated {
	return &validated{m: map[[sha256.Size]byte]*Identity{}}
}

// get returns the identity of a token validated before and still valid
// at now, with keys of the same generation.
func (v *validated) get(sum [sha256.Size]byte, now time.Time) *Identity {
	v.mu.RLock()
	id := v.m[sum]
	v.mu.RUnlock()
	if id == nil {
		return nil
	}
	if !id.fresh(now) {
		v.mu.Lock()
		delete(v.m, sum)
		v.mu.Unlock()
		return nil
	}
	return id
}

func (v *validated) put(sum [sha256.Size]byte, id *Identity) {
	v.mu.Lock()
	if len(v.m) >= maxValidated {
		clear(v.m)
	}
	v.m[sum] = id
	v.mu.Unlock()
}

// refusedTTL is how long a refused token stays refused without being
// checked again. A token presented again and again, which no issuer
// vouches for, costs one introspection call (or signature check) per
// refusedTTL, not one per request; a refusal rarely changes within it (a
// token is not active later than it was, its audience and expiry stay).
const refusedTTL = 10 * time.Second

// refused remembers tokens introspection refused with 401, by SHA-256,
// for refusedTTL: the negative counterpart of validated, bounded the same
// way. Answers of 503 (an issuer that cannot be asked now) are not
// remembered.
type refused struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]refusal
}

type refusal struct {
	err   *Error
	until time.Time
}

func newRefused() *refused {
	return &refused{m: map[[sha256.Size]byte]refusal{}}
}

// get returns the error a token was refused with lately, or nil.
func (r *refused) get(sum [sha256.Size]byte, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.m[sum]
	if !ok {
		return nil
	}
	if !now.Before(f.until) {
		delete(r.m, sum)
		return nil
	}
	return f.err
}

func (r *refused) put(sum [sha256.Size]byte, err error, now time.Time) {
	e, ok := err.(*Error)
	if !ok || e.Status != http.StatusUnauthorized {
		return
	}
	r.mu.Lock()
	if len(r.m) >= maxValidated {
		clear(r.m)
	}
	r.m[sum] = refusal{err: e, until: now.Add(refusedTTL)}
	r.mu.Unlock()
}

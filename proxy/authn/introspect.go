package authn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/provlog/provlog/log"
)

// introspectTTL bounds how long an introspection answer is trusted
// without asking again (a revoked token stops working within it).
const introspectTTL = 30 * time.Second

// introspect asks the configured introspection endpoints about an opaque
// token (RFC 7662), in config order, and maps the first active answer to
// an identity. Only a token that names no issuer is offered around so:
// one that names a trusted issuer goes to that issuer alone
// (introspectAt), as every other issuer would learn it, and could replay
// it, by being asked.
func (st *state) introspect(ctx context.Context, token string, sum [sha256.Size]byte, now time.Time) (*Identity, error) {
	var last error
	for _, is := range st.issuers {
		if is.cfg.Introspection == nil {
			continue
		}
		id, others, err := st.introspectAt(ctx, is, token, sum, now)
		if err == nil || !others {
			return id, err
		}
		last = err
	}
	if last == nil {
		return nil, invalid("unknown bearer token (not a static token, not a JWT of a trusted issuer, and no introspection endpoint is configured)")
	}
	return nil, last
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
	id.until = now.Add(introspectTTL)
	return id, false, nil
}

// introspection posts the token to the issuer's endpoint.
func (is *issuer) introspection(ctx context.Context, token string, now time.Time) (*claims, error) {
	endpoint := is.introspectURL(ctx, now)
	if endpoint == "" {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: "invalid_token",
			Description: fmt.Sprintf("issuer %s's introspection endpoint is not known yet (its discovery document could not be fetched)", is.cfg.Issuer)}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
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
		return nil, is.unavailable("introspection", fetchErr(endpoint, err))
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := decodeAnswer(resp, endpoint, &raw); err != nil {
		return nil, is.unavailable("introspection", err)
	}
	return parseClaims(raw)
}

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
// expire (or, for introspected tokens, for introspectTTL), so that a
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

package authn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provlog/provlog/log"
)

// MaxTokenBytes bounds a bearer token; a longer one is refused unread.
// (An access token's claims end up in entries, which are at most
// log.MaxEntrySize bytes.)
const MaxTokenBytes = 8 << 10

// IssuerTimeout bounds the time a token's first check may spend waiting
// for its issuers (discovery document, key set, introspection answers,
// together); beyond it the request gets 503.
const IssuerTimeout = 3 * time.Second

// StaticFunc looks a static token up: the actor it acts as, whether it is
// a reader's (may read the log, is no actor), and whether it is known at
// all. It must compare in constant time (it sees every token presented).
type StaticFunc func(token string) (actor string, reader, ok bool)

// Options are what an [Authenticator] needs besides its [Config].
type Options struct {
	// Static looks up static tokens (actors:, readers:); nil: none.
	Static StaticFunc
	// HTTPClient fetches discovery documents and key sets and calls
	// introspection endpoints (default: a client with a timeout of
	// IssuerTimeout; a token's check waits that long at most anyway).
	HTTPClient *http.Client
	// Logger receives key-set refreshes and fetch failures (never a
	// token); default discarded.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// An Identity is who a request's token authenticates.
type Identity struct {
	// Actor is the actor id entries carry: a static token's configured id,
	// or an OAuth token's issuer prefix and actor claim.
	Actor string
	// Reader: a static reader token, which may read the log but not act.
	Reader bool
	// Static: a static token, which holds every scope (a reader's only the
	// log's).
	Static bool
	// Scopes the OAuth token grants.
	Scopes []string
	// Expiry of the OAuth token.
	Expiry time.Time
	// Auth is the OAuth token's claims for the entries the request writes
	// (nil for static tokens).
	Auth *log.Auth

	// For the cache of validated tokens: the issuer whose key set (of
	// generation gen) verified a JWT, and when to validate it again.
	iss   *issuer
	gen   uint64
	until time.Time
	// st is the config the token was validated under, whose scopes
	// Require holds it to (nil for static tokens).
	st *state
}

// fresh reports whether a validated token's identity still holds at now:
// not expired, its issuer has withdrawn no key since, and its issuer's
// key set is not over jwks_max_age old. A token that is over it is
// checked again, which fetches the set again (issuer.key): a key the
// issuer withdrew stops working then for the tokens clients keep
// sending too, not only once a token not remembered comes.
func (id *Identity) fresh(now time.Time) bool {
	if !now.Before(id.until) {
		return false
	}
	if id.iss != nil {
		ks := id.iss.keys.Load()
		return ks != nil && ks.gen == id.gen && now.Sub(ks.fetched) <= id.iss.maxAge
	}
	return true
}

// Allows reports whether id holds the scopes required for group g.
func (a *Authenticator) Allows(id *Identity, g Group) bool {
	return a.Require(id, g) == nil
}

// Require returns nil if id may use group g, or an [*Error] with status
// 403 and error code insufficient_scope naming the scopes g needs.
func (a *Authenticator) Require(id *Identity, g Group) error {
	if id.Static {
		if id.Reader && g != GroupLog {
			return &Error{Status: http.StatusForbidden, Description: "a reader token may only read the log"}
		}
		return nil
	}
	st := id.st
	if st == nil {
		st = a.st.Load()
	}
	need := st.cfg.Scopes.of(g)
	for _, s := range need {
		if !slices.Contains(id.Scopes, s) {
			return &Error{Status: http.StatusForbidden, Code: "insufficient_scope", Scope: strings.Join(need, " "),
				Description: fmt.Sprintf("the token lacks scope %s, which %s need", s, g)}
		}
	}
	return nil
}

// An Error is why a request was not authenticated or authorized, as
// [Authenticator.WriteError] answers it.
type Error struct {
	Status      int    // 401, 403, or 503 (the issuer's keys cannot be had)
	Code        string // RFC 6750 §3.1 error code: invalid_request, invalid_token, insufficient_scope; "" for no token
	Description string // what was wrong, for the client; never holds the token
	Scope       string // for insufficient_scope: the scopes needed

	// logReason is why, for the operator's log alone, when the client is
	// told less (it never holds the token).
	logReason string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return "authn: " + e.Description
	}
	return "authn: " + e.Code + ": " + e.Description
}

func invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: fmt.Sprintf(format, args...)}
}

// ErrNoToken is the error of a request without an Authorization header.
var ErrNoToken = &Error{Status: http.StatusUnauthorized, Description: "this endpoint needs a token: send Authorization: Bearer <token>"}

// An Authenticator authenticates bearer tokens (see the package doc). It
// is safe for concurrent use, [Authenticator.Reload] included.
type Authenticator struct {
	opts Options
	st   atomic.Pointer[state]
	mu   sync.Mutex // serializes Reload
}

// state is one config of an [Authenticator]: what a request is
// authenticated under from start to end, though a reload replace it
// meanwhile.
type state struct {
	a        *Authenticator
	cfg      Config
	issuers  []*issuer
	cache    *validated     // tokens validated under this config
	refused  *refused       // tokens introspection refused under it, lately
	metadata []byte         // the protected resource metadata document
	proxies  []netip.Prefix // trusted_proxies
	changed  chan struct{}  // closed when a reload replaces this state
}

// New returns the authenticator of cfg, which must have passed
// [Config.Check]; cfg may be nil (static tokens only). Nothing is fetched
// yet: an issuer's keys are fetched when its first token arrives.
func New(cfg *Config, opts Options) (*Authenticator, error) {
	a := &Authenticator{opts: opts}
	if a.opts.HTTPClient == nil {
		a.opts.HTTPClient = &http.Client{Timeout: IssuerTimeout}
	}
	if a.opts.Logger == nil {
		a.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if a.opts.Now == nil {
		a.opts.Now = time.Now
	}
	st, err := a.newState(cfg, nil)
	if err != nil {
		return nil, err
	}
	a.st.Store(st)
	return a, nil
}

// Reload makes cfg (which must have passed [Config.Check]; nil: static
// tokens only) the authenticator's config from the next request on;
// requests already authenticated finish under the old one. Tokens are
// validated again under the new config (their actors and scopes may
// differ), but an issuer that fetches from the same places keeps its
// keys.
// An error changes nothing. Reloading an equal config does nothing.
func (a *Authenticator) Reload(cfg *Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.st.Load()
	var want Config
	if cfg != nil {
		want = *cfg
	}
	want.defaults()
	if reflect.DeepEqual(want, old.cfg) {
		return nil
	}
	st, err := a.newState(&want, old)
	if err != nil {
		return err
	}
	a.st.Store(st)
	close(old.changed)
	return nil
}

// Watch reports whether the config trusts any OAuth issuer, and returns
// a channel closed when a reload changes the config: a caller with
// nothing to do without issuers waits on it.
func (a *Authenticator) Watch() (issuers bool, changed <-chan struct{}) {
	st := a.st.Load()
	return len(st.issuers) > 0, st.changed
}

// newState builds the state of cfg, taking over old's issuers whose
// settings are the same.
func (a *Authenticator) newState(cfg *Config, old *state) (*state, error) {
	st := &state{a: a, cache: newValidated(), refused: newRefused(), changed: make(chan struct{})}
	if cfg != nil {
		st.cfg = *cfg
		st.cfg.Issuers = slices.Clone(cfg.Issuers)
	}
	st.cfg.defaults()
	var err error
	if st.proxies, err = parseProxies(st.cfg.TrustedProxies); err != nil {
		return nil, err
	}
	for i := range st.cfg.Issuers {
		ic := &st.cfg.Issuers[i]
		is, err := newIssuer(a, ic, st.cfg.KeyRefresh, old.source(ic, st.cfg.KeyRefresh))
		if err != nil {
			return nil, err
		}
		is.maxAge = st.cfg.KeyMaxAge
		st.issuers = append(st.issuers, is)
	}
	md := metadata{Resource: st.cfg.Resource, ScopesSupported: st.cfg.Scopes.all(),
		BearerMethodsSupported: []string{"header"}, ResourceName: "provlog"}
	for _, is := range st.cfg.Issuers {
		md.AuthorizationServers = append(md.AuthorizationServers, is.Issuer)
	}
	st.metadata, _ = json.Marshal(md)
	return st, nil
}

// source returns the source of old's issuer that fetches from where ic
// does with the same refresh floor, or nil.
func (old *state) source(ic *IssuerConfig, floor time.Duration) *source {
	if old == nil {
		return nil
	}
	for _, is := range old.issuers {
		if is.minRefresh == floor && sameSource(is.cfg, ic) {
			return is.source
		}
	}
	return nil
}

// Static returns an authenticator of static tokens only, for tests and
// for callers without an auth: config.
func Static(f StaticFunc) *Authenticator {
	a, _ := New(nil, Options{Static: f})
	return a
}

// Config returns the authenticator's config as it is now, defaults
// filled in. The caller must not change it.
func (a *Authenticator) Config() *Config { return &a.st.Load().cfg }

// Request authenticates r's Authorization header: [ErrNoToken] without
// one, an [*Error] for a malformed header or a token that fails.
func (a *Authenticator) Request(r *http.Request) (*Identity, error) {
	tok, present, err := Token(r.Header)
	if !present {
		return nil, ErrNoToken
	}
	if err != nil {
		return nil, &Error{Status: http.StatusUnauthorized, Code: "invalid_request", Description: err.Error()}
	}
	// Introspection calls are shared out by where requests come from.
	ctx := context.WithValue(r.Context(), sourceKey{}, a.st.Load().sourceOf(r))
	return a.Authenticate(ctx, tok)
}

// Authenticate authenticates one token: a static token, a JWT access
// token of a trusted issuer, or an opaque token an introspection endpoint
// vouches for. The error is an [*Error].
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*Identity, error) {
	if len(token) > MaxTokenBytes {
		return nil, invalid("the token is longer than %d bytes", MaxTokenBytes)
	}
	if a.opts.Static != nil {
		if actor, reader, ok := a.opts.Static(token); ok {
			return &Identity{Actor: actor, Reader: reader, Static: true}, nil
		}
	}
	return a.st.Load().authenticate(ctx, token)
}

// Holds reports whether an OAuth token that authenticated a session still
// holds: a JWT until its exp (and the clock skew), while its issuer keeps
// its key; an introspected token while its issuer says it is active,
// asked again once the last answer is its issuer's recheck old. issuer is
// the iss of the token's identity when it was validated
// (Identity.Auth.Issuer): an opaque token is asked about at that issuer
// alone, so another's hanging endpoint leaves its fate decided, and no
// other issuer learns it. A token whose issuer cannot be asked now holds
// (no one can tell).
func (a *Authenticator) Holds(ctx context.Context, token, issuer string) bool {
	_, err := a.Authenticate(context.WithValue(ctx, vouchedKey{}, issuer), token)
	return err == nil || errStatus(err) == http.StatusServiceUnavailable
}

// vouchedKey is the context key of the issuer that vouched for a token
// checked again (Holds).
type vouchedKey struct{}

// authenticate authenticates an OAuth token under st.
func (st *state) authenticate(ctx context.Context, token string) (*Identity, error) {
	if len(st.issuers) == 0 {
		return nil, invalid("unknown bearer token")
	}
	sum := sha256.Sum256([]byte(token))
	now := st.a.opts.Now()
	if id := st.cache.get(sum, now); id != nil {
		return id, nil
	}
	// One bound on what an issuer may cost a token's first check, its
	// discovery document, key set and introspection answer together: a
	// hanging issuer holds up its own tokens' requests for that long at
	// most, and no other issuer's (each fetches on its own).
	ctx, cancel := context.WithTimeout(ctx, IssuerTimeout)
	defer cancel()
	var id *Identity
	var err error
	if strings.Count(token, ".") == 2 {
		id, err = st.verifyJWT(ctx, token, sum, now)
	} else if iss, _ := ctx.Value(vouchedKey{}).(string); iss != "" {
		is := st.issuer(iss)
		if is == nil {
			return nil, invalid("the issuer %s that vouched for the token is no longer trusted", iss)
		}
		id, err = st.introspectToken(ctx, is, token, sum, now)
	} else {
		id, err = st.introspectToken(ctx, nil, token, sum, now)
	}
	if err != nil {
		// For the operator working out why a client gets 401: the reason
		// and the token's hash, never the token. A reason the client is
		// not told is one the operator must act on (the issuer's config,
		// or provlog's): at info.
		if e, ok := err.(*Error); ok && e.logReason != "" {
			st.a.opts.Logger.Info("authn: token refused", "reason", e.logReason, "token_sha256", tokenSum(sum))
		} else {
			st.a.opts.Logger.Debug("authn: token refused", "reason", err.Error(), "token_sha256", tokenSum(sum))
		}
		return nil, err
	}
	if id.until.IsZero() || id.until.After(id.Expiry.Add(st.cfg.ClockSkew)) {
		id.until = id.Expiry.Add(st.cfg.ClockSkew)
	}
	id.st = st
	st.cache.put(sum, id)
	return id, nil
}

// tokenSum is the hex SHA-256 of a token, as entries keep it.
func tokenSum(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:]) }

// errBearer is the one error of a malformed Authorization header.
var errBearer = errors.New(`malformed Authorization header: want "Bearer <token>" (RFC 6750 §2.1)`)

// Token returns the bearer token of an Authorization header according to
// RFC 6750 §2.1: the scheme "Bearer" in any case (RFC 9110 §11.1), one or
// more spaces, and a b64token (letters, digits and "-._~+/", then any
// "="s). present is false when there is no Authorization header, which is
// no error. Every endpoint of the sidecar reads tokens with this one
// function.
func Token(h http.Header) (token string, present bool, err error) {
	vals := h.Values("Authorization")
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", true, errBearer
	}
	v := vals[0]
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || v[len(scheme)] != ' ' {
		return "", true, errBearer
	}
	token = strings.TrimLeft(v[len(scheme):], " ")
	if !isB64Token(token) {
		return "", true, errBearer
	}
	return token, true, nil
}

// isB64Token reports whether s is an RFC 6750 b64token.
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

package authn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
)

// MaxTokenBytes bounds a bearer token; a longer one is refused unread.
// (An access token's claims end up in entries, which are at most
// log.MaxEntrySize bytes.)
const MaxTokenBytes = 8 << 10

// StaticFunc looks a static token up: the actor it acts as, whether it is
// a reader's (may read the log, is no actor), and whether it is known at
// all. It must compare in constant time (it sees every token presented).
type StaticFunc func(token string) (actor string, reader, ok bool)

// Options are what an [Authenticator] needs besides its [Config].
type Options struct {
	// Static looks up static tokens (actors:, readers:); nil: none.
	Static StaticFunc
	// HTTPClient fetches discovery documents and key sets and calls
	// introspection endpoints (default: a client with a 10s timeout).
	HTTPClient *http.Client
	// Logger receives key-set refreshes and fetch failures (never a
	// token); default discarded.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MinRefresh is the least time between two fetches of one issuer's
	// key set (default 10s): a flood of tokens naming unknown kids
	// cannot make the sidecar hammer the issuer.
	MinRefresh time.Duration
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
}

// fresh reports whether a validated token's identity still holds at now:
// not expired, and its issuer has withdrawn no key since.
func (id *Identity) fresh(now time.Time) bool {
	if !now.Before(id.until) {
		return false
	}
	if id.iss != nil {
		ks := id.iss.keys.Load()
		return ks != nil && ks.gen == id.gen
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
	need := a.cfg.Scopes.of(g)
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
// is safe for concurrent use.
type Authenticator struct {
	cfg     Config
	opts    Options
	issuers []*issuer
	cache   *validated
}

// New returns the authenticator of cfg, which must have passed
// [Config.Check]; cfg may be nil (static tokens only). Nothing is fetched
// yet: an issuer's keys are fetched when its first token arrives.
func New(cfg *Config, opts Options) (*Authenticator, error) {
	a := &Authenticator{opts: opts, cache: newValidated()}
	if cfg != nil {
		a.cfg = *cfg
	}
	if a.cfg.ClockSkew == 0 {
		a.cfg.ClockSkew = DefaultClockSkew
	}
	if a.opts.HTTPClient == nil {
		a.opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if a.opts.Logger == nil {
		a.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if a.opts.Now == nil {
		a.opts.Now = time.Now
	}
	if a.opts.MinRefresh <= 0 {
		a.opts.MinRefresh = 10 * time.Second
	}
	for i := range a.cfg.Issuers {
		is, err := newIssuer(a, &a.cfg.Issuers[i])
		if err != nil {
			return nil, err
		}
		a.issuers = append(a.issuers, is)
	}
	return a, nil
}

// Static returns an authenticator of static tokens only, for tests and
// for callers without an auth: config.
func Static(f StaticFunc) *Authenticator {
	a, _ := New(nil, Options{Static: f})
	return a
}

// Config returns the authenticator's config, defaults filled in.
func (a *Authenticator) Config() *Config { return &a.cfg }

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
	return a.Authenticate(r.Context(), tok)
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
	if len(a.issuers) == 0 {
		return nil, invalid("unknown bearer token")
	}
	sum := sha256.Sum256([]byte(token))
	now := a.opts.Now()
	if id := a.cache.get(sum, now); id != nil {
		return id, nil
	}
	var id *Identity
	var err error
	if strings.Count(token, ".") == 2 {
		id, err = a.verifyJWT(ctx, token, sum, now)
	} else {
		id, err = a.introspect(ctx, token, sum, now)
	}
	if err != nil {
		// For the operator working out why a client gets 401: the reason
		// and the token's hash, never the token.
		a.opts.Logger.Debug("authn: token refused", "reason", err.Error(), "token_sha256", tokenSum(sum))
		return nil, err
	}
	if id.until.IsZero() || id.until.After(id.Expiry.Add(a.cfg.ClockSkew)) {
		id.until = id.Expiry.Add(a.cfg.ClockSkew)
	}
	a.cache.put(sum, id)
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

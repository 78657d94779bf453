package authn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/log"
)

// verifyJWT validates a JWT access token (RFC 9068) and maps it to an
// identity. The iss of the (still unverified) payload picks the issuer
// whose keys must verify it; everything else is read only after the
// signature checks out.
func (st *state) verifyJWT(ctx context.Context, token string, sum [sha256.Size]byte, now time.Time) (*Identity, error) {
	c, err := unverifiedClaims(token)
	if err != nil {
		// A JWT that names a trusted issuer stays that issuer's: one with
		// keys refuses it with the reason, one with introspection alone
		// is asked. It went to the introspection endpoints of the others,
		// credentials and all.
		if is := st.issuer(peekIss(token)); is != nil {
			if is.hasKeys() {
				return nil, err
			}
			return st.introspectToken(ctx, is, token, sum, now)
		}
		if !st.introspects() {
			return nil, err
		}
		return st.introspectToken(ctx, nil, token, sum, now) // not a JWT after all: an opaque token with two dots
	}
	is := st.issuer(c.Iss)
	if is == nil {
		return nil, invalid("the token's issuer %q is not trusted here", truncate(c.Iss, 200))
	}
	if !is.hasKeys() {
		// Its issuer's alone: another issuer's endpoint would learn it.
		return st.introspectToken(ctx, is, token, sum, now)
	}
	jws, err := jose.ParseSignedCompact(token, is.algs)
	if err != nil {
		var ua *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &ua) {
			return nil, invalid("the token is signed with %s, which issuer %s may not use (accepted: %s)", truncate(string(ua.Got), 20), is.cfg.Issuer, strings.Join(is.cfg.Algorithms, ", "))
		}
		return nil, invalid("the token is not a signed JWT: %v", err)
	}
	h := jws.Signatures[0].Protected
	if typ, ok := h.ExtraHeaders[jose.HeaderType]; ok {
		t, _ := typ.(string)
		switch strings.ToLower(t) {
		case "at+jwt", "application/at+jwt", "jwt":
		default:
			return nil, invalid("the token's typ %q is not an access token's (RFC 9068 §2.1: at+jwt)", truncate(t, 40))
		}
	}
	key, gen, err := is.key(ctx, h.KeyID, h.Algorithm, now)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, invalid("the token's signature does not verify with issuer %s's key %q", is.cfg.Issuer, truncate(h.KeyID, 80))
	}
	if !bytes.Equal(payload, c.raw) {
		return nil, invalid("the token's payload changed under its signature") // cannot happen: the same bytes, decoded twice
	}
	id, err := st.identity(is, c, sum, now, log.AuthViaJWT)
	if err != nil {
		return nil, err
	}
	id.iss, id.gen = is, gen
	return id, nil
}

// unverifiedClaims reads the claims of a compact JWS's payload before its
// signature is checked: only its iss is used, to pick the issuer whose
// keys are to verify it, and the rest counts once the signature has been
// found good over these same bytes. Decoding the claims once, here, is
// what a token's first use costs beyond the signature check.
func unverifiedClaims(token string) (*claims, error) {
	_, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, invalid("the token's payload is not base64url")
	}
	c, err := parseClaims(b)
	if err != nil {
		return nil, err
	}
	if c.Iss == "" {
		return nil, invalid("the token names no issuer (iss)")
	}
	return c, nil
}

// peekIss returns the iss of a token's payload if it is a JSON object
// with a string iss, else "": just enough to tell whose token it is.
func peekIss(token string) string {
	_, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	json.Unmarshal(b, &c)
	return c.Iss
}

// introspects reports whether any issuer has an introspection endpoint.
func (st *state) introspects() bool {
	for _, is := range st.issuers {
		if is.cfg.Introspection != nil {
			return true
		}
	}
	return false
}

// issuer returns the trusted issuer named iss, or nil.
func (st *state) issuer(iss string) *issuer {
	for _, is := range st.issuers {
		if is.cfg.Issuer == iss {
			return is
		}
	}
	return nil
}

// identity checks the claims of a verified token (or an introspection
// answer) against the resource, the clock and the issuer's mapping, and
// returns the identity they make.
func (st *state) identity(is *issuer, c *claims, sum [sha256.Size]byte, now time.Time, via string) (*Identity, error) {
	skew := st.cfg.ClockSkew
	switch {
	case c.Iss != is.cfg.Issuer:
		return nil, invalid("the token's issuer %q is not %q", truncate(c.Iss, 200), is.cfg.Issuer)
	case c.Exp == nil:
		return nil, invalid("the token has no exp (RFC 9068 §2.2)")
	case now.After(c.Exp.Add(skew)):
		return nil, invalid("the token expired at %s", c.Exp.UTC().Format(time.RFC3339))
	case c.Nbf != nil && now.Add(skew).Before(*c.Nbf):
		return nil, invalid("the token is not valid before %s", c.Nbf.UTC().Format(time.RFC3339))
	case c.Iat != nil && now.Add(skew).Before(*c.Iat):
		return nil, invalid("the token was issued in the future (%s)", c.Iat.UTC().Format(time.RFC3339))
	case !contains(c.Aud, st.cfg.Resource):
		return nil, invalid("the token's audience does not include this resource, %s (RFC 8707; request the token with resource=%s)", st.cfg.Resource, st.cfg.Resource)
	case c.Sub == "":
		return nil, invalid("the token has no sub (RFC 9068 §2.2)")
	case c.Cnf:
		return nil, invalid("the token is sender-constrained (cnf), which this resource cannot check; use a bearer token")
	}
	if kind := c.notAccessToken(); kind != "" {
		return nil, invalid("the token is not an access token (%s); send the access token", truncate(kind, 60))
	}
	clientID := c.ClientID
	if clientID == "" {
		clientID = c.Azp
	}
	value, err := actorValue(is, c, clientID)
	if err != nil {
		return nil, err
	}
	actor := is.cfg.ActorPrefix + value
	// As static ids are checked, and as an id the issuer's tokens map to
	// (mappable).
	err = CheckActor(actor, MaxActor)
	if err == nil {
		err = mappable(value)
	}
	if err != nil {
		return nil, invalid("the actor mapped from claim %s is not one a client may act as: %v", is.cfg.ActorClaim, err)
	}
	scopes := strings.Fields(c.Scope)
	if len(scopes) == 0 {
		scopes = c.Scp
	}
	return &Identity{
		Actor:  actor,
		Scopes: scopes,
		Expiry: *c.Exp,
		Auth: &log.Auth{
			Issuer: c.Iss, Subject: c.Sub, ClientID: clientID, Act: c.Act, JTI: c.Jti,
			Scope: strings.Join(scopes, " "), TokenSHA256: tokenSum(sum), Via: via,
		},
	}, nil
}

// ClientNamespace begins, after an issuer's actor prefix, the actor of a
// client's own token: one whose sub is its client_id (or azp) and which
// acts for no one (no act), as client-credentials tokens are. In such a
// token sub names a client, elsewhere a person, and the two may share a
// name (RFC 9068 §5): a client registered as "alice" must not act as the
// person alice. A person's claim value that begins with it, or reads as
// it (in any case, or by its [Skeleton]: a Cyrillic с for the c), is
// refused.
const ClientNamespace = "client:"

// actorValue returns what follows the issuer's actor prefix in the
// token's actor: ClientNamespace and the client id for a client's own
// token, else the value of the issuer's actor claim.
func actorValue(is *issuer, c *claims, clientID string) (string, error) {
	if clientID != "" && c.Sub == clientID && c.Act == nil {
		return ClientNamespace + clientID, nil
	}
	value := c.Sub
	if is.cfg.ActorClaim != "sub" {
		var ok bool
		if value, ok = c.claim(is.cfg.ActorClaim); !ok || value == "" {
			return "", invalid("the token has no string claim %s (once), which names the actor here", is.cfg.ActorClaim)
		}
		if is.cfg.ActorClaim == "email" && !c.EmailVerified && !is.cfg.AllowUnverifiedEmail {
			e := invalid("the token names no actor this resource takes")
			e.logReason = "actor_claim is email, but the token does not say email_verified: true, so the issuer does not vouch for the address (allow_unverified_email on the issuer takes such tokens)"
			return "", e
		}
	}
	if readsAsClient(value) {
		return "", invalid("the token's claim %s begins %q, or reads as it, which names clients' own tokens here", is.cfg.ActorClaim, ClientNamespace)
	}
	return value, nil
}

// mappable returns why value, what follows an issuer's actor prefix in
// an actor id, is one no token of the issuer maps to, or nil: one that
// reads as beginning ClientNamespace without being spelt so
// (readsAsClient: "Client:", a Cyrillic с), or one (a client's: its
// client id) that is not text or has space at its start or end, which
// the prefix would hide ("kc: bob", "kc:client: bot"). A person's value
// spelt "client:…" is refused where a token is mapped (actorValue).
// Tokens are held to it (state.identity), and so are the actors a task
// is offered or handed off to (Config.Owns).
func mappable(value string) error {
	own, client := strings.CutPrefix(value, ClientNamespace)
	if !client && readsAsClient(value) {
		return fmt.Errorf("the value %q begins %q in another case or in look-alike letters, which names clients' own tokens here", truncate(value, 80), ClientNamespace)
	}
	if !validText(own) || strings.TrimSpace(own) != own {
		return fmt.Errorf("the value %q is not text, or has space at its start or end", truncate(own, 80))
	}
	return nil
}

// clientSkeleton is ClientNamespace's skeleton ([Skeleton]).
var clientSkeleton = Skeleton(ClientNamespace)

// readsAsClient reports whether a person's claim value begins with
// ClientNamespace or reads as it: in any case, as [InNamespace] reads
// prefixes ("CLIENT:"), or with the same skeleton ("Client:", a Cyrillic
// с for the c). Its actor would read as a client's own. It reads value
// only as far as the namespace's length in skeleton characters.
func readsAsClient(value string) bool {
	if len(value) >= len(ClientNamespace) && strings.EqualFold(value[:len(ClientNamespace)], ClientNamespace) {
		return true
	}
	skel, _ := skeletonPrefix(value, utf8.RuneCountInString(clientSkeleton))
	return skel == clientSkeleton
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validText reports whether s is valid UTF-8 without control characters.
func validText(s string) bool {
	for _, r := range s {
		if r == 0xFFFD || unicode.IsControl(r) { // C0, DEL and C1 (U+0085, the CSI U+009B...)
			return false
		}
	}
	return true
}

// truncate shortens text from a token for an error message.
func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

package authn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/log"
)

// verifyJWT validates a JWT access token (RFC 9068) and maps it to an
// identity. The iss of the (still unverified) payload picks the issuer
// whose keys must verify it; everything else is read only after the
// signature checks out.
func (a *Authenticator) verifyJWT(ctx context.Context, token string, sum [sha256.Size]byte, now time.Time) (*Identity, error) {
	iss, err := unverifiedIssuer(token)
	if err != nil {
		if a.introspects() {
			return a.introspect(ctx, token, sum, now) // not a JWT after all: an opaque token with two dots
		}
		return nil, err
	}
	is := a.issuer(iss)
	if is == nil {
		return nil, invalid("the token's issuer %q is not trusted here", truncate(iss, 200))
	}
	if !is.hasKeys() {
		return a.introspect(ctx, token, sum, now)
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
	c, err := parseClaims(payload)
	if err != nil {
		return nil, err
	}
	if c.Iss != iss {
		return nil, invalid("the token's iss changed under its signature") // cannot happen: same bytes
	}
	id, err := a.identity(is, c, sum, now, log.AuthViaJWT)
	if err != nil {
		return nil, err
	}
	id.iss, id.gen = is, gen
	return id, nil
}

// introspects reports whether any issuer has an introspection endpoint.
func (a *Authenticator) introspects() bool {
	for _, is := range a.issuers {
		if is.cfg.Introspection != nil {
			return true
		}
	}
	return false
}

// issuer returns the trusted issuer named iss, or nil.
func (a *Authenticator) issuer(iss string) *issuer {
	for _, is := range a.issuers {
		if is.cfg.Issuer == iss {
			return is
		}
	}
	return nil
}

// unverifiedIssuer reads the iss of a compact JWS's payload, only to pick
// the issuer whose keys are to verify it.
func unverifiedIssuer(token string) (string, error) {
	_, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", invalid("the token's payload is not base64url")
	}
	var p struct {
		Iss *string `json:"iss"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", invalid("the token's payload is not a JSON object")
	}
	if p.Iss == nil || *p.Iss == "" {
		return "", invalid("the token names no issuer (iss)")
	}
	return *p.Iss, nil
}

// claims are the members of an access token (or an introspection answer)
// the sidecar reads; raw keeps them all, for a configured actor claim.
type claims struct {
	Iss, Sub, Jti, ClientID, Azp, Scope string
	Aud                                 []string
	Scp                                 []string
	Exp, Nbf, Iat                       *time.Time
	Act                                 *log.Act
	Cnf                                 bool
	Active                              *bool // introspection only
	raw                                 map[string]json.RawMessage
}

// parseClaims decodes a JSON claims set, checking each member's type.
func parseClaims(b []byte) (*claims, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, invalid("the claims are not a JSON object")
	}
	c := &claims{raw: raw}
	var err error
	str := func(k string, dst *string) {
		if v, ok := raw[k]; ok && err == nil && string(v) != "null" {
			if json.Unmarshal(v, dst) != nil {
				err = invalid("claim %s is not a string", k)
			}
		}
	}
	str("iss", &c.Iss)
	str("sub", &c.Sub)
	str("jti", &c.Jti)
	str("client_id", &c.ClientID)
	str("azp", &c.Azp)
	str("scope", &c.Scope)
	list := func(k string, dst *[]string) {
		if v, ok := raw[k]; ok && err == nil && string(v) != "null" {
			var one string
			if json.Unmarshal(v, &one) == nil {
				*dst = []string{one}
			} else if json.Unmarshal(v, dst) != nil {
				err = invalid("claim %s is neither a string nor an array of strings", k)
			}
		}
	}
	list("aud", &c.Aud)
	list("scp", &c.Scp)
	date := func(k string, dst **time.Time) {
		if v, ok := raw[k]; ok && err == nil {
			t, derr := numericDate(v)
			if derr != nil {
				err = invalid("claim %s is not a NumericDate (RFC 7519 §2)", k)
			}
			*dst = &t
		}
	}
	date("exp", &c.Exp)
	date("nbf", &c.Nbf)
	date("iat", &c.Iat)
	if v, ok := raw["act"]; ok && err == nil {
		c.Act, err = parseAct(v, 1)
	}
	if v, ok := raw["active"]; ok && err == nil {
		var act bool
		if json.Unmarshal(v, &act) != nil {
			err = invalid("member active is not a boolean")
		}
		c.Active = &act
	}
	_, c.Cnf = raw["cnf"]
	if err != nil {
		return nil, err
	}
	return c, nil
}

// numericDate reads seconds since the epoch, perhaps fractional.
func numericDate(v json.RawMessage) (time.Time, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return time.Time{}, err
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, errors.New("out of range")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// actClaim is the JSON form of an RFC 8693 act claim.
type actClaim struct {
	Sub      *string         `json:"sub"`
	Iss      string          `json:"iss"`
	ClientID string          `json:"client_id"`
	Act      json.RawMessage `json:"act"`
}

// parseAct reads a delegation chain, at most log.MaxActDepth deep.
func parseAct(v json.RawMessage, depth int) (*log.Act, error) {
	if depth > log.MaxActDepth {
		return nil, invalid("the act chain is deeper than %d", log.MaxActDepth)
	}
	var ac actClaim
	if err := json.Unmarshal(v, &ac); err != nil {
		return nil, invalid("claim act is not an object of strings sub, iss, client_id and a nested act")
	}
	if ac.Sub == nil || *ac.Sub == "" {
		return nil, invalid("an act claim names no sub (RFC 8693 §4.1)")
	}
	a := &log.Act{Subject: *ac.Sub, Issuer: ac.Iss, ClientID: ac.ClientID}
	if len(ac.Act) > 0 && string(ac.Act) != "null" {
		var err error
		if a.Act, err = parseAct(ac.Act, depth+1); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// identity checks the claims of a verified token (or an introspection
// answer) against the resource, the clock and the issuer's mapping, and
// returns the identity they make.
func (a *Authenticator) identity(is *issuer, c *claims, sum [sha256.Size]byte, now time.Time, via string) (*Identity, error) {
	skew := a.cfg.ClockSkew
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
	case !contains(c.Aud, a.cfg.Resource):
		return nil, invalid("the token's audience does not include this resource, %s (RFC 8707; request the token with resource=%s)", a.cfg.Resource, a.cfg.Resource)
	case c.Sub == "":
		return nil, invalid("the token has no sub (RFC 9068 §2.2)")
	case c.Cnf:
		return nil, invalid("the token is sender-constrained (cnf), which this resource cannot check; use a bearer token")
	}
	value := c.Sub
	if is.cfg.ActorClaim != "sub" {
		v, ok := c.raw[is.cfg.ActorClaim]
		if !ok || json.Unmarshal(v, &value) != nil || value == "" {
			return nil, invalid("the token has no string claim %s, which names the actor here", is.cfg.ActorClaim)
		}
		if is.cfg.ActorClaim == "email" {
			if v, ok := c.raw["email_verified"]; ok && string(v) == "false" {
				return nil, invalid("the token's email is not verified")
			}
		}
	}
	actor := is.cfg.ActorPrefix + value
	if len(actor) > MaxActor || !validText(value) {
		return nil, invalid("the actor %q mapped from claim %s is over %d bytes or not text", truncate(actor, 80), is.cfg.ActorClaim, MaxActor)
	}
	scopes := strings.Fields(c.Scope)
	if len(scopes) == 0 {
		scopes = c.Scp
	}
	clientID := c.ClientID
	if clientID == "" {
		clientID = c.Azp
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
		if r == 0xFFFD || r < 0x20 || r == 0x7f {
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

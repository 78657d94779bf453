package log

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxActDepth bounds the nesting of an [Auth]'s delegation chain (RFC 8693
// "act" claims within "act" claims).
const MaxActDepth = 8

// Values of [Auth].Via.
const (
	AuthViaJWT           = "jwt"           // a JWT access token (RFC 9068) the sidecar verified
	AuthViaIntrospection = "introspection" // an opaque token the issuer vouched for (RFC 7662)
)

// Auth is an entry's "auth" member: who, according to which identity
// provider, made the request that wrote the entry. The entry's "actor" is
// the id the sidecar mapped from these claims; Auth keeps the claims
// themselves, so that a reader can tell which person an agent acted for,
// through which client, with which token, without trusting the mapping.
// The token itself is never kept, only its SHA-256.
//
// Its wire form is a JSON object with the members iss, sub, client_id,
// act, jti, scope, token_sha256 and via; empty ones are left out.
type Auth struct {
	Issuer   string // "iss": the authorization server that issued the token
	Subject  string // "sub": whom the token is about (the person, or the client itself)
	ClientID string // "client_id": the OAuth client the token was issued to (azp or client_id)
	// Act is the delegation chain (RFC 8693 §4.1): the party acting for
	// Subject, and in its own Act whoever acts for that party.
	Act   *Act
	JTI   string // "jti": the token's own id, if it has one
	Scope string // "scope": the scopes the token grants, space-separated
	// TokenSHA256 is the hex SHA-256 of the token as presented.
	TokenSHA256 string
	Via         string // AuthViaJWT or AuthViaIntrospection
}

// Act is one link of a delegation chain (RFC 8693 "act").
type Act struct {
	Subject  string // "sub": the acting party
	Issuer   string // "iss", if the chain names one
	ClientID string // "client_id", if the chain names one
	Act      *Act   // who acts for this party, if anyone
}

type authContextKey struct{}

// WithAuth returns ctx carrying a, the authentication of the request ctx
// belongs to. The writers of entries for that request (calls, reads, task
// operations) read it with [AuthFrom] and put it in their entries.
func WithAuth(ctx context.Context, a *Auth) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, authContextKey{}, a)
}

// AuthFrom returns the Auth that [WithAuth] put in ctx, or nil.
func AuthFrom(ctx context.Context) *Auth {
	a, _ := ctx.Value(authContextKey{}).(*Auth)
	return a
}

// check reports what is wrong with a for an entry.
func (a *Auth) check() error {
	if a.Issuer == "" || a.Subject == "" {
		return errors.New("auth: iss and sub are required")
	}
	if h, err := hex.DecodeString(a.TokenSHA256); err != nil || len(h) != 32 {
		return errors.New("auth: token_sha256 must be 64 hex digits")
	}
	switch a.Via {
	case AuthViaJWT, AuthViaIntrospection:
	default:
		return fmt.Errorf("auth: via %q: want %q or %q", a.Via, AuthViaJWT, AuthViaIntrospection)
	}
	depth := 0
	for c := a.Act; c != nil; c = c.Act {
		if depth++; depth > MaxActDepth {
			return fmt.Errorf("auth: act chain deeper than %d", MaxActDepth)
		}
		if c.Subject == "" {
			return errors.New("auth: every act needs a sub")
		}
	}
	return nil
}

// MarshalJSON writes a as an entry's "auth" member, so that what shows
// an entry's auth elsewhere (task histories) shows it in the same form.
func (a *Auth) MarshalJSON() ([]byte, error) { return json.Marshal(a.fields()) }

// UnmarshalJSON reads an entry's "auth" member, as strictly as entries
// are read.
func (a *Auth) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p, err := parseAuth(v)
	if err != nil {
		return err
	}
	*a = *p
	return nil
}

// fields returns a's wire form.
func (a *Auth) fields() map[string]any {
	f := map[string]any{"iss": a.Issuer, "sub": a.Subject, "token_sha256": a.TokenSHA256, "via": a.Via}
	for k, v := range map[string]string{"client_id": a.ClientID, "jti": a.JTI, "scope": a.Scope} {
		if v != "" {
			f[k] = v
		}
	}
	if a.Act != nil {
		f["act"] = a.Act.fields()
	}
	return f
}

func (c *Act) fields() map[string]any {
	f := map[string]any{"sub": c.Subject}
	if c.Issuer != "" {
		f["iss"] = c.Issuer
	}
	if c.ClientID != "" {
		f["client_id"] = c.ClientID
	}
	if c.Act != nil {
		f["act"] = c.Act.fields()
	}
	return f
}

// parseAuth reads an entry's "auth" member, refusing members it does not
// know and values of the wrong type.
func parseAuth(v any) (*Auth, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("auth: not an object")
	}
	rd := fieldReader{f: m}
	for k, v := range m {
		switch k {
		case "iss", "sub", "client_id", "act", "jti", "scope", "token_sha256", "via":
			if v == "" {
				rd.fail(k, "empty (an empty member is left out)") // one encoding per entry
			}
		default:
			rd.fail(k, "not a member of auth")
		}
	}
	a := &Auth{Issuer: rd.str("iss"), Subject: rd.str("sub"), ClientID: rd.str("client_id"),
		JTI: rd.str("jti"), Scope: rd.str("scope"), TokenSHA256: rd.str("token_sha256"), Via: rd.str("via")}
	if rd.err != nil {
		return nil, fmt.Errorf("auth: %w", rd.err)
	}
	if v, ok := m["act"]; ok {
		var err error
		if a.Act, err = parseAct(v, 1); err != nil {
			return nil, err
		}
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return a, nil
}

func parseAct(v any, depth int) (*Act, error) {
	if depth > MaxActDepth {
		return nil, fmt.Errorf("auth: act chain deeper than %d", MaxActDepth)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("auth: act is not an object")
	}
	rd := fieldReader{f: m}
	for k, v := range m {
		switch k {
		case "sub", "iss", "client_id", "act":
			if v == "" {
				rd.fail(k, "empty (an empty member is left out)")
			}
		default:
			rd.fail(k, "not a member of act")
		}
	}
	c := &Act{Subject: rd.str("sub"), Issuer: rd.str("iss"), ClientID: rd.str("client_id")}
	if rd.err != nil {
		return nil, fmt.Errorf("auth: act: %w", rd.err)
	}
	if v, ok := m["act"]; ok {
		var err error
		if c.Act, err = parseAct(v, depth+1); err != nil {
			return nil, err
		}
	}
	return c, nil
}

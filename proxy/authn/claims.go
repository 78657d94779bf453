package authn

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/provlog/provlog/log"
)

// claims are the members of an access token (or an introspection answer)
// the sidecar reads.
type claims struct {
	Iss, Sub, Jti, ClientID, Azp, Scope string
	// TokenUse (Hydra's token_use), TokenType (RFC 7662's token_type) and
	// Typ (Keycloak's typ claim) say what kind of token it is, when given.
	TokenUse, TokenType, Typ string
	Aud                      []string
	Scp                      []string
	Exp, Nbf, Iat            *time.Time
	Act                      *log.Act
	Cnf                      bool
	Active                   *bool // introspection only
	EmailVerified            bool  // email_verified is true
	// raw is the claims set as given, for a configured actor claim.
	raw []byte
}

// The claims parseClaims reads, as bits for its duplicate check.
const (
	seenIss = 1 << iota
	seenSub
	seenJti
	seenClientID
	seenAzp
	seenScope
	seenAud
	seenScp
	seenExp
	seenNbf
	seenIat
	seenAct
	seenCnf
	seenActive
	seenEmailVerified
	seenTokenUse
	seenTokenType
	seenTyp
)

// parseClaims reads a JSON claims set (a JWT's payload or an
// introspection answer) in one pass, checking each member's type. Claim
// names are case-sensitive (RFC 7519 §4), so only exact names count, and a
// claim it reads may appear once. It costs json.Valid and one scan: a
// token's first use pays it once, before and for its signature check.
func parseClaims(b []byte) (*claims, error) {
	if !json.Valid(b) {
		return nil, invalid("the claims are not a JSON object")
	}
	c := &claims{raw: b}
	var seen int
	err := members(b, func(key []byte, v []byte) error {
		bit, err := c.member(key, v)
		if bit != 0 {
			if seen&bit != 0 {
				return invalid("claim %s appears twice", key)
			}
			seen |= bit
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// member reads one member of a claims set into c, returning its bit (0
// for a claim the sidecar does not read).
func (c *claims) member(key []byte, v []byte) (int, error) {
	str := func(bit int, dst *string) (int, error) {
		s, ok := jsonString(v)
		if !ok && !isNull(v) {
			return bit, invalid("claim %s is not a string", key)
		}
		*dst = s
		return bit, nil
	}
	list := func(bit int, dst *[]string) (int, error) {
		l, ok := stringList(v)
		if !ok {
			return bit, invalid("claim %s is neither a string nor an array of strings", key)
		}
		*dst = l
		return bit, nil
	}
	date := func(bit int, dst **time.Time) (int, error) {
		t, err := numericDate(v)
		if err != nil {
			return bit, invalid("claim %s is not a NumericDate (RFC 7519 §2)", key)
		}
		*dst = &t
		return bit, nil
	}
	switch string(key) {
	case "iss":
		return str(seenIss, &c.Iss)
	case "sub":
		return str(seenSub, &c.Sub)
	case "jti":
		return str(seenJti, &c.Jti)
	case "client_id":
		return str(seenClientID, &c.ClientID)
	case "azp":
		return str(seenAzp, &c.Azp)
	case "scope":
		return str(seenScope, &c.Scope)
	case "aud":
		return list(seenAud, &c.Aud)
	case "scp":
		return list(seenScp, &c.Scp)
	case "exp":
		return date(seenExp, &c.Exp)
	case "nbf":
		return date(seenNbf, &c.Nbf)
	case "iat":
		return date(seenIat, &c.Iat)
	case "act":
		if isNull(v) {
			return seenAct, nil
		}
		var err error
		c.Act, err = parseAct(v, 1)
		return seenAct, err
	case "cnf":
		c.Cnf = true
		return seenCnf, nil
	case "active":
		act := string(v) == "true"
		if !act && string(v) != "false" && !isNull(v) {
			return seenActive, invalid("member active is not a boolean")
		}
		c.Active = &act
		return seenActive, nil
	case "email_verified":
		c.EmailVerified = string(v) == "true"
		return seenEmailVerified, nil
	case "token_use":
		return str(seenTokenUse, &c.TokenUse)
	case "token_type":
		return str(seenTokenType, &c.TokenType)
	case "typ":
		return str(seenTyp, &c.Typ)
	}
	return 0, nil
}

// notAccessToken returns why the claims are not an access token's, or ""
// when nothing they say makes them another kind. An introspection
// endpoint answers active for refresh tokens too (RFC 7662 §2.1: the
// hint only orders its search), and a refresh token is only ever meant
// for the authorization server, so what kind of token it is must be read
// from the answer: Hydra's token_use, RFC 7662's token_type, Keycloak's
// typ (Refresh, ID, Offline for the other kinds).
func (c *claims) notAccessToken() string {
	switch strings.ToLower(c.TokenUse) {
	case "", "access_token", "access":
	default:
		return "token_use " + c.TokenUse
	}
	switch strings.ToLower(c.TokenType) {
	case "", "bearer", "access_token", "urn:ietf:params:oauth:token-type:access_token":
	default:
		return "token_type " + c.TokenType
	}
	switch strings.ToLower(c.Typ) {
	case "", "bearer", "at+jwt", "application/at+jwt":
	default:
		return "typ " + c.Typ
	}
	return ""
}

// claim returns the string claim key of the claims set, for a configured
// actor claim: ok is false when it is missing, not a string, or given
// twice.
func (c *claims) claim(key string) (value string, ok bool) {
	n := 0
	members(c.raw, func(k []byte, v []byte) error {
		if string(k) == key {
			n++
			value, ok = jsonString(v)
		}
		return nil
	})
	return value, ok && n == 1
}

// numericDate reads seconds since the epoch, perhaps fractional.
func numericDate(v []byte) (time.Time, error) {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return time.Time{}, errors.New("not a number")
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, errors.New("out of range")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// errAct is the error of a malformed act claim, made once: parseAct runs
// on every token's first use and must not build it on the way to success.
var errAct = invalid("claim act is not an object of strings sub, iss, client_id and a nested act")

// parseAct reads a delegation chain (RFC 8693 §4.1: sub, and perhaps iss,
// client_id and a nested act), at most log.MaxActDepth deep.
func parseAct(v []byte, depth int) (*log.Act, error) {
	if depth > log.MaxActDepth {
		return nil, invalid("the act chain is deeper than %d", log.MaxActDepth)
	}
	bad := errAct
	if len(v) == 0 || v[0] != '{' {
		return nil, bad
	}
	a := &log.Act{}
	var hasSub bool
	var seen int
	err := members(v, func(key []byte, m []byte) error {
		var dst *string
		var bit int
		switch string(key) {
		case "sub":
			dst, bit, hasSub = &a.Subject, seenSub, true
		case "iss":
			dst, bit = &a.Issuer, seenIss
		case "client_id":
			dst, bit = &a.ClientID, seenClientID
		case "act":
			if seen&seenAct != 0 {
				return bad
			}
			seen |= seenAct
			if isNull(m) {
				return nil
			}
			var err error
			a.Act, err = parseAct(m, depth+1)
			return err
		default:
			return nil
		}
		if seen&bit != 0 {
			return bad
		}
		seen |= bit
		s, ok := jsonString(m)
		if !ok && !isNull(m) {
			return bad
		}
		*dst = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !hasSub || a.Subject == "" {
		return nil, invalid("an act claim names no sub (RFC 8693 §4.1)")
	}
	return a, nil
}

// The scanner below reads JSON that json.Valid has accepted, so it only
// finds where values end; it never judges syntax. Each byte is looked at
// a bounded number of times (nested objects are rescanned once per level
// that reads them, and act is at most log.MaxActDepth deep).

// members calls fn with each member of the JSON object b: its key (as
// encoding/json decodes it; valid only during the call) and its value's
// bytes. It stops at fn's first error. b must be valid JSON; anything but
// an object is an error.
func members(b []byte, fn func(key []byte, v []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return invalid("the claims are not a JSON object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		end := skipString(b, i)
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			s, _ := jsonString(b[i:end]) // escaped: decoded, as encoding/json would
			key = []byte(s)
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the colon
		vend := skipValue(b, i)
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i >= len(b) || b[i] == '}' {
			return nil
		}
		i = skipSpace(b, i+1) // the comma
	}
	return nil
}

// elements calls fn with each element of the JSON array b.
func elements(b []byte, fn func(v []byte) bool) bool {
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return true
	}
	for i < len(b) {
		end := skipValue(b, i)
		if !fn(b[i:end]) {
			return false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] == ']' {
			return true
		}
		i = skipSpace(b, i+1)
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the end of the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// jsonString returns the string a JSON string value holds; ok is false
// for any other value. Like encoding/json, it replaces invalid UTF-8.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// stringList reads a string or an array of strings; null is none.
func stringList(v []byte) ([]string, bool) {
	if s, ok := jsonString(v); ok {
		return []string{s}, true
	}
	if isNull(v) {
		return nil, true
	}
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var out []string
	ok := elements(v, func(e []byte) bool {
		s, ok := jsonString(e)
		out = append(out, s)
		return ok
	})
	return out, ok
}

func isNull(v []byte) bool { return string(v) == "null" }

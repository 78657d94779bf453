package authn

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
)

// Defaults and bounds of [Config].
const (
	DefaultClockSkew = 30 * time.Second
	MaxClockSkew     = 5 * time.Minute
	// DefaultKeyRefresh is the least time between two fetches of one
	// issuer's key set; MinKeyRefresh and MaxKeyRefresh bound what
	// jwks_min_refresh may set.
	DefaultKeyRefresh = 10 * time.Second
	MinKeyRefresh     = time.Second
	MaxKeyRefresh     = time.Hour
	// DefaultKeyMaxAge is how old a key set may grow before it is fetched
	// again (jwks_max_age), dropping withdrawn keys.
	DefaultKeyMaxAge = 5 * time.Minute
	// DefaultRecheck is how long an introspected token is taken without
	// asking its issuer again (recheck): a token revoked is refused, and
	// a session on it closed, within it. MinRecheck and MaxRecheck bound
	// what recheck may set.
	DefaultRecheck = 30 * time.Second
	MinRecheck     = time.Second
	MaxRecheck     = 10 * time.Minute
	// MaxActor is the longest actor id a token may map to (as opp's
	// MaxActor).
	MaxActor = 128
)

// DefaultAlgorithms are the JWS algorithms accepted when an issuer lists
// none: asymmetric ones only.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Config is the "auth:" section of the config (see the package doc).
type Config struct {
	// Resource is this sidecar's canonical URL as its clients reach it,
	// e.g. https://provlog.example/mcp: the audience (RFC 8707 resource)
	// every OAuth token must name, and the resource of the protected
	// resource metadata. Required with issuers.
	Resource string `yaml:"resource"`
	// Issuers are the trusted authorization servers.
	Issuers []IssuerConfig `yaml:"issuers"`
	// Scopes are the scopes an OAuth token needs per tool group.
	Scopes Scopes `yaml:"scopes"`
	// ClockSkew is how far exp, nbf and iat may be off (default
	// DefaultClockSkew, at most MaxClockSkew).
	ClockSkew time.Duration `yaml:"clock_skew"`
	// KeyRefresh is the least time between two fetches of one issuer's
	// key set (default DefaultKeyRefresh, between MinKeyRefresh and
	// MaxKeyRefresh): a token naming an unknown kid (a rotated-in key)
	// makes the sidecar fetch the set again, and a flood of them cannot
	// make it hammer the issuer. It also spaces retries of a discovery
	// document that could not be fetched.
	KeyRefresh time.Duration `yaml:"jwks_min_refresh"`
	// KeyMaxAge is how old an issuer's key set may grow before the next
	// token makes the sidecar fetch it again, dropping the keys the
	// issuer withdrew (default DefaultKeyMaxAge, between KeyRefresh and
	// MaxKeyRefresh).
	KeyMaxAge time.Duration `yaml:"jwks_max_age"`
	// TrustedProxies are the reverse proxies (CIDR prefixes, or single
	// addresses) whose X-Forwarded-For header is believed: a request
	// from one of them is taken to come from the rightmost hop the header
	// names that is not itself a trusted proxy, for the share of
	// introspection calls each source gets. From any other peer the
	// header is ignored: a client may write what it likes there.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// IssuerConfig is one trusted authorization server.
type IssuerConfig struct {
	// Issuer is the tokens' "iss", compared exactly.
	Issuer string `yaml:"issuer"`
	// DiscoveryURL is the issuer's OpenID Connect discovery document
	// (or RFC 8414 metadata), which names jwks_uri and perhaps
	// introspection_endpoint. Set it or JWKSURL (or only introspection).
	DiscoveryURL string `yaml:"discovery_url"`
	// JWKSURL is the issuer's JSON Web Key Set, when not discovered.
	JWKSURL string `yaml:"jwks_url"`
	// Algorithms are the JWS algorithms accepted (default
	// DefaultAlgorithms); "none" and the HS* ones are refused.
	Algorithms []string `yaml:"algorithms"`
	// ActorClaim names the claim whose value becomes the actor (after
	// ActorPrefix): "sub" (the default), "email", or any string claim.
	ActorClaim string `yaml:"actor_claim"`
	// AllowUnverifiedEmail takes actor_claim email from tokens that do
	// not say email_verified: true. Off by default: an account may hold
	// an address it was never shown to own.
	AllowUnverifiedEmail bool `yaml:"allow_unverified_email"`
	// ActorPrefix goes in front of every actor of this issuer (default:
	// the issuer URL's host and path, then ":").
	ActorPrefix string `yaml:"actor_prefix"`
	// Introspection checks opaque tokens with the issuer (RFC 7662).
	Introspection *IntrospectionConfig `yaml:"introspection"`
	// Recheck is how long an introspected token of this issuer is taken
	// without asking again (default DefaultRecheck, between MinRecheck
	// and MaxRecheck): shorter ends a revoked token's requests and
	// sessions sooner, at one introspection call per token and recheck.
	Recheck time.Duration `yaml:"recheck"`
}

// IntrospectionConfig is an RFC 7662 token introspection endpoint and the
// client credentials the sidecar authenticates to it with.
type IntrospectionConfig struct {
	// URL is the endpoint (default: the discovery document's
	// introspection_endpoint).
	URL      string `yaml:"url"`
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client secret; cmd reads it (relative
	// to the config file) into ClientSecret.
	ClientSecretFile string `yaml:"client_secret_file"`
	ClientSecret     string `yaml:"-"`
}

// Scopes are the scopes required per tool group. An empty list requires
// nothing beyond a valid token for this resource.
type Scopes struct {
	// Tools: the downstream servers' tools, resources and prompts.
	Tools []string `yaml:"tools"`
	// Tasks: the task tools (create_task, accept_task, ...).
	Tasks []string `yaml:"tasks"`
	// Log: the log API's protected reads and the provlog__ tools.
	Log []string `yaml:"log"`
}

// A Group is what a request asks for, as far as scopes go.
type Group int

// Tool groups.
const (
	GroupTools Group = iota // a downstream server's tool, resource or prompt
	GroupTasks              // a task tool
	GroupLog                // a protected log read or a provlog__ tool
)

func (g Group) String() string {
	switch g {
	case GroupTools:
		return "tools"
	case GroupTasks:
		return "tasks"
	case GroupLog:
		return "log"
	}
	return fmt.Sprintf("Group(%d)", int(g))
}

// of returns the scopes group g needs.
func (s *Scopes) of(g Group) []string {
	switch g {
	case GroupTools:
		return s.Tools
	case GroupTasks:
		return s.Tasks
	case GroupLog:
		return s.Log
	}
	return nil
}

// all returns every scope named, sorted, once each.
func (s *Scopes) all() []string {
	out := slices.Concat(s.Tools, s.Tasks, s.Log)
	slices.Sort(out)
	return slices.Compact(out)
}

// Enabled reports whether the config trusts any issuer.
func (c *Config) Enabled() bool { return c != nil && len(c.Issuers) > 0 }

// Check reports what is wrong with the config, and fills in defaults
// (clock skew, algorithms, actor claims and prefixes). cmd calls it while
// loading the config, before anything is opened.
func (c *Config) Check() error {
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.ClockSkew < 0 || c.ClockSkew > MaxClockSkew {
		return fmt.Errorf("auth: clock_skew %s: want between 0s and %s", c.ClockSkew, MaxClockSkew)
	}
	if c.KeyRefresh == 0 {
		c.KeyRefresh = DefaultKeyRefresh
	}
	if c.KeyRefresh < MinKeyRefresh || c.KeyRefresh > MaxKeyRefresh {
		return fmt.Errorf("auth: jwks_min_refresh %s: want between %s and %s (the least time between two fetches of an issuer's keys)", c.KeyRefresh, MinKeyRefresh, MaxKeyRefresh)
	}
	if c.KeyMaxAge == 0 {
		c.KeyMaxAge = max(DefaultKeyMaxAge, c.KeyRefresh)
	}
	if c.KeyMaxAge < c.KeyRefresh || c.KeyMaxAge > MaxKeyRefresh {
		return fmt.Errorf("auth: jwks_max_age %s: want between jwks_min_refresh (%s) and %s (how old an issuer's keys may grow before they are fetched again)", c.KeyMaxAge, c.KeyRefresh, MaxKeyRefresh)
	}
	if _, err := parseProxies(c.TrustedProxies); err != nil {
		return err
	}
	if len(c.Issuers) == 0 {
		if c.Resource != "" || len(c.Scopes.all()) > 0 {
			return errors.New("auth: resource and scopes need at least one entry under issuers")
		}
		return nil
	}
	u, err := url.Parse(c.Resource)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
		return fmt.Errorf("auth: resource %q: want this sidecar's canonical URL as clients reach it, such as https://provlog.example/mcp (no query or fragment)", c.Resource)
	}
	for _, s := range c.Scopes.all() {
		if s == "" || strings.ContainsAny(s, " \"\\") || !isPrintableASCII(s) {
			return fmt.Errorf("auth: scope %q: scopes are printable ASCII without spaces, quotes or backslashes (RFC 6749 §3.3)", s)
		}
	}
	seen := map[string]bool{}
	for i := range c.Issuers {
		is := &c.Issuers[i]
		if err := is.check(); err != nil {
			return fmt.Errorf("auth: issuer %q: %w", is.Issuer, err)
		}
		if seen[is.Issuer] {
			return fmt.Errorf("auth: issuer %q is listed twice", is.Issuer)
		}
		seen[is.Issuer] = true
	}
	for i, a := range c.Issuers {
		for j, b := range c.Issuers {
			if i != j && strings.HasPrefix(strings.ToLower(b.ActorPrefix), strings.ToLower(a.ActorPrefix)) {
				return fmt.Errorf("auth: actor_prefix %q of %q begins actor_prefix %q of %q, so their actors could collide; give each issuer a prefix that begins no other", a.ActorPrefix, a.Issuer, b.ActorPrefix, b.Issuer)
			}
		}
	}
	return nil
}

// defaults fills in the clock skew and key refresh floor when unset.
func (c *Config) defaults() {
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.KeyRefresh == 0 {
		c.KeyRefresh = DefaultKeyRefresh
	}
	if c.KeyMaxAge == 0 {
		c.KeyMaxAge = max(DefaultKeyMaxAge, c.KeyRefresh)
	}
}

func (is *IssuerConfig) check() error {
	u, err := url.Parse(is.Issuer)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return errors.New("issuer must be the http(s) URL the tokens name in iss")
	}
	for name, v := range map[string]string{"discovery_url": is.DiscoveryURL, "jwks_url": is.JWKSURL} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
			return fmt.Errorf("%s %q is not an http(s) URL", name, v)
		}
	}
	if is.DiscoveryURL != "" && is.JWKSURL != "" {
		return errors.New("set discovery_url or jwks_url, not both")
	}
	if is.DiscoveryURL == "" && is.JWKSURL == "" && is.Introspection == nil {
		return errors.New("set discovery_url or jwks_url (JWT access tokens), or introspection (opaque tokens)")
	}
	if len(is.Algorithms) == 0 {
		is.Algorithms = DefaultAlgorithms
	}
	for _, a := range is.Algorithms {
		if !slices.Contains(DefaultAlgorithms, a) {
			return fmt.Errorf("algorithm %q is not accepted: choose from %s (asymmetric only; none and HS* are never accepted)", a, strings.Join(DefaultAlgorithms, ", "))
		}
	}
	if is.ActorClaim == "" {
		is.ActorClaim = "sub"
	}
	if is.ActorPrefix == "" {
		is.ActorPrefix = strings.TrimSuffix(u.Host+u.Path, "/") + ":"
	}
	if !isPrintableASCII(is.ActorPrefix) || len(is.ActorPrefix) > MaxActor/2 {
		return fmt.Errorf("actor_prefix %q: want printable ASCII of at most %d bytes", is.ActorPrefix, MaxActor/2)
	}
	// Every actor of such a prefix is or reads as provlog's own and would
	// be refused at each request; the default one is a host name
	// ("provlog.corp:", "pr0vlog.corp:").
	if ReservedActor(is.ActorPrefix + "x") {
		return fmt.Errorf("actor_prefix %q: actor ids beginning %q, or reading as such, are provlog's own; set actor_prefix to one outside them, such as \"idp:\"", is.ActorPrefix, log.ActorNamespace)
	}
	if is.Recheck == 0 {
		is.Recheck = DefaultRecheck
	}
	if is.Recheck < MinRecheck || is.Recheck > MaxRecheck {
		return fmt.Errorf("recheck %s: want between %s and %s (how long an introspected token is taken without asking again)", is.Recheck, MinRecheck, MaxRecheck)
	}
	if in := is.Introspection; in != nil {
		if in.URL == "" && is.DiscoveryURL == "" {
			return errors.New("introspection: set url (or discovery_url on the issuer)")
		}
		if in.URL != "" {
			if u, err := url.Parse(in.URL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
				return fmt.Errorf("introspection: url %q is not an http(s) URL", in.URL)
			}
		}
		if in.ClientID == "" {
			return errors.New("introspection: client_id is required (the sidecar authenticates to the endpoint)")
		}
	}
	return nil
}

// Owns reports whether actor is an id a trusted issuer's tokens may map
// to: it begins with an issuer's actor prefix, exactly, and what follows
// is a value a token maps to (mappable: not "Client:bot", " bob"). A
// handoff may name such an actor, who need not have called yet.
func (c *Config) Owns(actor string) bool {
	if c == nil {
		return false
	}
	for _, is := range c.Issuers {
		if len(actor) > len(is.ActorPrefix) && strings.HasPrefix(actor, is.ActorPrefix) && mappable(actor[len(is.ActorPrefix):]) == nil {
			return true
		}
	}
	return false
}

// Reserves reports whether actor is in the namespace of a trusted issuer
// ([InNamespace] of its actor prefix, in any case): a static actor id may
// not be one.
func (c *Config) Reserves(actor string) bool {
	if c == nil {
		return false
	}
	for _, is := range c.Issuers {
		if InNamespace(actor, is.ActorPrefix) {
			return true
		}
	}
	return false
}

// InNamespace reports whether actor is in the namespace of an issuer of
// actor_prefix prefix: it begins with prefix, in any case (a reader
// takes "IDP:bob" for "idp:bob"), and has more after it.
func InNamespace(actor, prefix string) bool {
	return len(actor) > len(prefix) && strings.EqualFold(actor[:len(prefix)], prefix)
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// parseProxies parses trusted_proxies: CIDR prefixes (10.0.0.0/8, with
// no host bits set) or single addresses.
func parseProxies(ps []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range ps {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			ip, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, fmt.Errorf("auth: trusted_proxies %q: want a CIDR prefix such as 10.0.0.0/8 or an address such as 192.0.2.1", p)
			}
			ip = ip.Unmap()
			pfx = netip.PrefixFrom(ip, ip.BitLen())
		}
		if pfx != pfx.Masked() {
			return nil, fmt.Errorf("auth: trusted_proxies %q: the prefix has host bits set; want %s", p, pfx.Masked())
		}
		if a := pfx.Addr(); a.Is4In6() {
			// Peers are compared unmapped: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
			if pfx.Bits() < 96 {
				return nil, fmt.Errorf("auth: trusted_proxies %q: an IPv4-mapped prefix shorter than /96; write the IPv4 prefix", p)
			}
			pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
		}
		out = append(out, pfx)
	}
	return out, nil
}

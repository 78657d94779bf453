package authn

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/log"
)

// maxDocBytes bounds a discovery document, key set or introspection
// answer.
const maxDocBytes = 1 << 20

// issuer is one trusted authorization server at run time: its config,
// and where its keys come from.
type issuer struct {
	a    *Authenticator
	cfg  *IssuerConfig
	algs []jose.SignatureAlgorithm
	// maxAge is how old the key set may grow before the next token makes
	// the sidecar fetch it again (keys the issuer withdrew stop working
	// then): Config.KeyMaxAge.
	maxAge time.Duration
	*source
}

// source is an issuer's endpoints once discovered and its key set. A
// reloaded config whose issuer fetches from the same places keeps it
// (sameSource), so a reload costs no fetch and forgets no key.
type source struct {
	// minRefresh is the least time between two fetches of the key set
	// (Config.KeyRefresh).
	minRefresh time.Duration

	keys atomic.Pointer[keySet] // nil until first fetched

	mu           sync.Mutex // held while fetching
	lastFetch    time.Time  // the last attempt at the key set, for the rate limit
	lastDiscover time.Time  // the last attempt at the discovery document
	jwksURL      string     // from the config or the discovery document
	introspect   string     // likewise
	discovered   bool

	// The introspection calls' rate limit (takeIntrospection): the
	// issuer's bucket, and each request source's.
	introMu      sync.Mutex
	intro        bucket
	introSources map[string]*bucket
}

// sameSource reports whether issuers a and b fetch their keys and
// introspect tokens at the same places.
func sameSource(a, b *IssuerConfig) bool {
	url := func(c *IssuerConfig) string {
		if c.Introspection == nil {
			return "\x00"
		}
		return c.Introspection.URL
	}
	return a.Issuer == b.Issuer && a.DiscoveryURL == b.DiscoveryURL && a.JWKSURL == b.JWKSURL && url(a) == url(b)
}

// keySet is one fetch of an issuer's JWKS, by kid.
type keySet struct {
	byKID   map[string][]jose.JSONWebKey
	all     []jose.JSONWebKey
	fetched time.Time
	prints  map[string]bool // fingerprint of every key
	gen     uint64          // changes when the set does; validated tokens of older sets are forgotten
}

// newIssuer returns the issuer of cfg, with src as its source if not nil.
func newIssuer(a *Authenticator, cfg *IssuerConfig, minRefresh time.Duration, src *source) (*issuer, error) {
	if src == nil {
		src = &source{jwksURL: cfg.JWKSURL, minRefresh: minRefresh}
		if cfg.Introspection != nil {
			src.introspect = cfg.Introspection.URL
		}
	}
	is := &issuer{a: a, cfg: cfg, source: src}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	for _, s := range algs {
		alg := jose.SignatureAlgorithm(s)
		if strings.HasPrefix(s, "HS") || s == "none" {
			return nil, fmt.Errorf("auth: issuer %q: algorithm %s is never accepted", cfg.Issuer, s)
		}
		is.algs = append(is.algs, alg)
	}
	return is, nil
}

// hasKeys reports whether the issuer's tokens can be JWTs.
func (is *issuer) hasKeys() bool { return is.cfg.JWKSURL != "" || is.cfg.DiscoveryURL != "" }

// key returns the public key for a JWS header's kid and alg. An unknown
// kid (or a set older than Config.KeyMaxAge) makes it fetch the set
// again, at most once per Config.KeyRefresh.
func (is *issuer) key(ctx context.Context, kid, alg string, now time.Time) (any, uint64, error) {
	ks := is.keys.Load()
	if ks == nil || now.Sub(ks.fetched) > is.maxAge || ks.find(kid, alg) == nil {
		if err := is.refresh(ctx, now); err != nil {
			if ks == nil {
				return nil, 0, is.unavailable("key set fetch", err)
			}
			is.a.opts.Logger.Warn("authn: refreshing an issuer's keys failed; keeping the old ones", "issuer", is.cfg.Issuer, "err", err)
		}
		ks = is.keys.Load()
	}
	k := ks.find(kid, alg)
	if k == nil {
		if kid == "" {
			return nil, 0, invalid("the token names no kid, and issuer %s has more than one key for %s", is.cfg.Issuer, alg)
		}
		return nil, 0, invalid("issuer %s has no %s key with kid %q", is.cfg.Issuer, alg, kid)
	}
	return k.Key, ks.gen, nil
}

// find returns the key of kid fit for alg, or nil. Without a kid, the
// set's one key fit for alg.
func (ks *keySet) find(kid, alg string) *jose.JSONWebKey {
	if ks == nil {
		return nil
	}
	cands := ks.byKID[kid]
	if kid == "" {
		cands = ks.all
	}
	var found *jose.JSONWebKey
	for i := range cands {
		if fits(&cands[i], alg) {
			if found != nil {
				return nil // ambiguous
			}
			found = &cands[i]
		}
	}
	return found
}

// fits reports whether k may verify a signature of alg: a public key of
// the algorithm's type, for signing, whose own alg (if it names one) is
// alg.
func fits(k *jose.JSONWebKey, alg string) bool {
	if k.Use != "" && k.Use != "sig" || k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch k.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false // private and symmetric keys never verify a token
}

// refresh fetches the key set (discovering its URL first if need be),
// unless the last attempt was less than minRefresh ago. Concurrent
// callers wait for one fetch.
func (is *issuer) refresh(ctx context.Context, now time.Time) error {
	is.mu.Lock()
	defer is.mu.Unlock()
	if !is.lastFetch.IsZero() && now.Sub(is.lastFetch) < is.minRefresh {
		if is.keys.Load() != nil {
			return nil // fetched just now (perhaps by a concurrent caller): use what there is
		}
		return fmt.Errorf("the last attempt failed %s ago; the next is due in %s", now.Sub(is.lastFetch).Round(time.Millisecond), (is.minRefresh - now.Sub(is.lastFetch)).Round(time.Millisecond))
	}
	is.lastFetch = now
	if err := is.discover(ctx, now); err != nil {
		return err
	}
	if is.jwksURL == "" {
		return errors.New("the discovery document names no jwks_uri")
	}
	var set jose.JSONWebKeySet
	if err := is.a.getJSON(ctx, is.jwksURL, &set); err != nil {
		return fmt.Errorf("fetching the key set: %w", err)
	}
	ks := &keySet{byKID: map[string][]jose.JSONWebKey{}, fetched: now, prints: map[string]bool{}}
	for _, k := range set.Keys {
		if !k.Valid() || !k.IsPublic() {
			continue // a symmetric or private key is no issuer's verification key
		}
		ks.byKID[k.KeyID] = append(ks.byKID[k.KeyID], k)
		ks.all = append(ks.all, k)
		ks.prints[fingerprint(&k)] = true
	}
	old := is.keys.Load()
	ks.gen = 1
	if old != nil {
		ks.gen = old.gen
		for p := range old.prints {
			if !ks.prints[p] {
				ks.gen++ // a key was withdrawn: forget what it validated
				break
			}
		}
	}
	is.keys.Store(ks)
	is.a.opts.Logger.Info("authn: fetched an issuer's keys", "issuer", is.cfg.Issuer, "keys", len(ks.all))
	return nil
}

// fingerprint names a key with its kid, alg and use: the same key
// material under another kid or alg counts as another key.
func fingerprint(k *jose.JSONWebKey) string {
	tp, _ := k.Thumbprint(crypto.SHA256)
	return k.KeyID + "\x00" + k.Algorithm + "\x00" + k.Use + "\x00" + string(tp)
}

// discovery is what the sidecar reads of a discovery document.
type discovery struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// discover reads the discovery document once, if one is configured,
// trying at most once per minRefresh. Called with is.mu held.
func (is *issuer) discover(ctx context.Context, now time.Time) error {
	if is.cfg.DiscoveryURL == "" || is.discovered {
		return nil
	}
	if !is.lastDiscover.IsZero() && now.Sub(is.lastDiscover) < is.minRefresh {
		return fmt.Errorf("the discovery document could not be fetched %s ago; the next attempt is due in %s", now.Sub(is.lastDiscover).Round(time.Millisecond), (is.minRefresh - now.Sub(is.lastDiscover)).Round(time.Millisecond))
	}
	is.lastDiscover = now
	var d discovery
	if err := is.a.getJSON(ctx, is.cfg.DiscoveryURL, &d); err != nil {
		return fmt.Errorf("fetching the discovery document: %w", err)
	}
	if d.Issuer != is.cfg.Issuer {
		return fmt.Errorf("the discovery document at %s is issuer %q's, not %q (OpenID Connect Discovery §4.3)", log.RedactURL(is.cfg.DiscoveryURL), d.Issuer, is.cfg.Issuer)
	}
	is.jwksURL = d.JWKSURI
	if is.introspect == "" && is.cfg.Introspection != nil {
		is.introspect = d.IntrospectionEndpoint
	}
	is.discovered = true
	return nil
}

// getJSON GETs url and decodes its JSON body (at most maxDocBytes) into v.
func (a *Authenticator) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return fetchErr(url, err)
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, url, v)
}

// decodeAnswer decodes a 200 answer's JSON body into v. Its errors name
// the URL redacted (log.RedactURL): they reach the operator's log.
func decodeAnswer(resp *http.Response, url string, v any) error {
	url = log.RedactURL(url)
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	if len(body) > maxDocBytes {
		return fmt.Errorf("%s: the answer is over %d bytes", url, maxDocBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

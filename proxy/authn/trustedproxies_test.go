package authn_test

// Behind a reverse proxy every client connects from the proxy's address,
// so the introspection share keyed on it would be one for all. With
// trusted_proxies, a request from one of them is keyed on the rightmost
// X-Forwarded-For hop that is not a trusted proxy; from anywhere else the
// header is ignored, since a client may write it.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// decodeAuth decodes an auth: section as the config does (unknown keys
// refused), with the issuer is's URLs and the lines extra.
func decodeAuth(t *testing.T, is *authntest.Issuer, extra string) (*authn.Config, error) {
	t.Helper()
	var cfg authn.Config
	dec := yaml.NewDecoder(bytes.NewReader(fmt.Appendf(nil, `
resource: %s
issuers:
  - issuer: %s
    discovery_url: %s
    introspection: {client_id: provlog}
%s`, resource, is.URL, is.DiscoveryURL(), extra)))
	dec.KnownFields(true)
	err := dec.Decode(&cfg)
	if err == nil {
		cfg.Issuers[0].Introspection.ClientSecret = "s3cret"
	}
	return &cfg, err
}

func TestIntrospectionShareBehindProxy(t *testing.T) {
	is := authntest.Start(t)
	cfg, err := decodeAuth(t, is, "trusted_proxies: [127.0.0.0/8, \"10.0.0.0/8\"]\n")
	if err != nil {
		t.Fatalf("decoding an auth: section with trusted_proxies: %v", err)
	}
	c := &clock{t: time.Now()}
	a := newAuth(t, cfg, c, nil)
	from := func(addr, xff, tok string) error {
		r := httptestRequest("Bearer " + tok)
		r.RemoteAddr = addr
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		_, err := a.Request(r)
		return err
	}
	// A flood from 192.0.2.66 through the proxy, which writes the client
	// it heard from last; the client's own spoofed hop comes first.
	unavailable := 0
	for i := range 100 {
		if st, _ := status(from("127.0.0.1:40000", "203.0.113.9, 192.0.2.66", fmt.Sprintf("made-up-%d", i))); st == 503 {
			unavailable++
		}
	}
	if unavailable == 0 {
		t.Fatal("100 made-up tokens at once from one client through the proxy were all asked about")
	}
	for i, c := range []struct{ addr, xff, what string }{
		{"127.0.0.1:40001", "198.51.100.7", "another client through the proxy"},
		{"127.0.0.1:40002", "192.0.2.66, 198.51.100.8, 10.1.2.3", "another client through two trusted proxies"},
		{"[::ffff:127.0.0.1]:40003", "[2001:db8::1]:5555", "an IPv6 client with a port through the proxy, mapped"},
	} {
		tok := fmt.Sprintf("good-%d", i)
		is.Opaque(tok, is.Claims(resource, fmt.Sprintf("svc-%d", i)))
		if err := from(c.addr, c.xff, tok); err != nil {
			t.Errorf("a good token from %s (X-Forwarded-For %q) after a flood from 192.0.2.66: %v", c.what, c.xff, err)
		}
	}
	// The flooder's share is used up however it spells the header, and
	// the header of a peer that is no trusted proxy is not read.
	for i, c := range []struct{ addr, xff, what string }{
		{"127.0.0.1:40004", "198.51.100.9, 192.0.2.66", "the flooder through the proxy, naming another first"},
		{"192.0.2.66:40005", "198.51.100.10", "the flooder directly, naming another in the header"},
		{"127.0.0.1:40006", "192.0.2.66, 10.9.9.9", "the flooder through two trusted proxies"},
	} {
		tok := fmt.Sprintf("flooder-%d", i)
		is.Opaque(tok, is.Claims(resource, fmt.Sprintf("svc-flood-%d", i)))
		if st, _ := status(from(c.addr, c.xff, tok)); st != 503 {
			t.Errorf("a new token from %s (X-Forwarded-For %q) in the flood's second: status %d, want 503 (its share is used up)", c.what, c.xff, st)
		}
	}
}

func TestTrustedProxiesChecked(t *testing.T) {
	is := authntest.Start(t)
	for _, bad := range []string{"127.0.0.1/33", "::ffff:0.0.0.0/64", "not-an-address", `""`, `"10.0.0.0/8 "`, "10.0.0.1/8"} {
		cfg, err := decodeAuth(t, is, "trusted_proxies: ["+bad+"]\n")
		if err == nil {
			err = cfg.Check()
		}
		if err == nil {
			t.Errorf("trusted_proxies [%s] was taken", bad)
		}
	}
	cfg, err := decodeAuth(t, is, "trusted_proxies: [192.0.2.1, 2001:db8::/32, \"::ffff:10.0.0.0/104\"]\n")
	if err == nil {
		err = cfg.Check()
	}
	if err != nil {
		t.Errorf("trusted_proxies of an address and an IPv6 prefix: %v", err)
	}
}

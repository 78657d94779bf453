package authn

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzForwardedFor: whatever X-Forwarded-For lines a client sends through
// a trusted proxy, the client found is the peer or an address the lines
// name, never an IPv4 address mapped into IPv6.
func FuzzForwardedFor(f *testing.F) {
	for _, s := range []string{"", "192.0.2.1", "203.0.113.9, 192.0.2.66", "192.0.2.66,10.0.0.1", "[2001:db8::1]:5555",
		"unknown, 10.0.0.1", "::ffff:10.0.0.1", "fe80::1%eth0", "1.2.3.4:80\n10.0.0.2, 10.0.0.3", ",,,", "10.0.0.1, 10.0.0.2"} {
		f.Add(s)
	}
	peer := netip.MustParseAddr("10.0.0.254")
	trusted := netip.MustParsePrefix("10.0.0.0/8")
	f.Fuzz(func(t *testing.T, header string) {
		values := strings.Split(header, "\n")
		got := forwardedFor(values, peer, trusted.Contains)
		if got == peer {
			return
		}
		named := false
		for _, v := range values {
			for _, hop := range strings.Split(v, ",") {
				if ip, ok := parseHop(strings.TrimSpace(hop)); ok && ip == got {
					named = true
				}
			}
		}
		if !named {
			t.Fatalf("forwardedFor(%q) = %v, an address the header does not name", values, got)
		}
		if got.Unmap() != got {
			t.Fatalf("forwardedFor(%q) = %v, a mapped address", values, got)
		}
	})
}

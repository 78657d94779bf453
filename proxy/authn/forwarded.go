package authn

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// sourceOf returns what introspection calls are shared out by for r: the
// address of the client it came from (an IPv6 one's /64). That is the
// peer's, unless the peer is a trusted proxy (trusted_proxies): then it
// is the rightmost X-Forwarded-For hop that is not one (forwardedFor).
func (st *state) sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	peer = peer.Unmap()
	if st.trusts(peer) {
		peer = forwardedFor(r.Header.Values("X-Forwarded-For"), peer, st.trusts)
	}
	if peer.Is6() {
		p, _ := peer.Prefix(64)
		return p.String()
	}
	return peer.String()
}

// trusts reports whether ip is one of trusted_proxies.
func (st *state) trusts(ip netip.Addr) bool {
	for _, p := range st.proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwardedFor returns the client a request from the trusted proxy peer
// came from, according to the X-Forwarded-For header lines values: each
// proxy appends the address it heard from, so the header is read from its
// right end, hop by hop, while the hops are trusted proxies; the first
// that is not is the client. What lies left of it was written by the
// client or by proxies nobody vouches for, and is not read. A hop that is
// no address ends the walk at the last proxy that wrote one. When every
// hop is a trusted proxy, the leftmost is the client. The walk takes time
// linear in the header's length.
func forwardedFor(values []string, peer netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for done := false; !done; {
			hop := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				hop, v = v[j+1:], v[:j]
			} else {
				done = true
			}
			ip, ok := parseHop(strings.TrimSpace(hop))
			if !ok {
				return client
			}
			client = ip
			if !trusted(ip) {
				return ip
			}
		}
	}
	return client
}

// parseHop parses one X-Forwarded-For hop: an address, or an address and
// port ("192.0.2.1:5555", "[2001:db8::1]:5555").
func parseHop(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		ip = ap.Addr()
	}
	if ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

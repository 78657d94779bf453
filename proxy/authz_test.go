package proxy

import "github.com/provlog/provlog/proxy/authn"

// staticTokens is an authenticator of the static tokens f knows.
func staticTokens(f func(tok string) (actor string, ok bool)) *authn.Authenticator {
	return authn.Static(func(tok string) (string, bool, bool) {
		actor, ok := f(tok)
		return actor, false, ok
	})
}

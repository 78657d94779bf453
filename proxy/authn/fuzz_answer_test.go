package authn

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// FuzzIdPAnswer: an identity provider's answers (a key set, a discovery
// document, an introspection answer) come over the network; decodeAnswer
// and what refresh does with each key of a set (Valid, IsPublic,
// fingerprint, fits) never panic on them.
func FuzzIdPAnswer(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"k1","use":"sig","alg":"ES256"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},{"kty":"oct","k":"AAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","x5c":["MIIB"]}]}`))
	f.Add([]byte(`{"issuer":"https://idp.example/","jwks_uri":"https://idp.example/jwks","introspection_endpoint":"x"}`))
	f.Add([]byte(`{"active":true,"sub":"a"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		answer := func() *http.Response {
			return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: io.NopCloser(bytes.NewReader(body))}
		}
		var set jose.JSONWebKeySet
		if decodeAnswer(answer(), "https://idp.example/jwks?secret=x", &set) == nil {
			for _, k := range set.Keys {
				if !k.Valid() || !k.IsPublic() {
					continue
				}
				fingerprint(&k)
				for _, alg := range []string{"ES256", "RS256", "EdDSA", "HS256"} {
					fits(&k, alg)
				}
			}
		}
		var d discovery
		decodeAnswer(answer(), "https://idp.example/.well-known/openid-configuration", &d)
		var raw map[string]any
		decodeAnswer(answer(), "https://idp.example/introspect", &raw)
	})
}

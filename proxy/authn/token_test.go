package authn_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/provlog/provlog/proxy/authn"
)

// TestToken: the one reader of Authorization headers (RFC 6750 §2.1).
func TestToken(t *testing.T) {
	for _, c := range []struct {
		header  []string
		token   string
		present bool
		ok      bool
	}{
		{nil, "", false, true},
		{[]string{"Bearer abc"}, "abc", true, true},
		{[]string{"bearer abc"}, "abc", true, true},  // RFC 9110 §11.1: schemes are case-insensitive
		{[]string{"BEARER abc"}, "abc", true, true},  // (/mcp took these, /log/ did not)
		{[]string{"Bearer  abc"}, "abc", true, true}, // RFC 6750: 1*SP
		{[]string{"Bearer a-._~+/9=="}, "a-._~+/9==", true, true},
		{[]string{"Bearer"}, "", true, false},
		{[]string{"Bearer "}, "", true, false},
		{[]string{"Bearer\tabc"}, "", true, false},
		{[]string{"Bearerabc"}, "", true, false},
		{[]string{"Bearer abc "}, "", true, false},
		{[]string{"Bearer abc def"}, "", true, false},
		{[]string{"Bearer a=b"}, "", true, false},
		{[]string{"Bearer =abc"}, "", true, false},
		{[]string{"Basic abc"}, "", true, false},
		{[]string{" Bearer abc"}, "", true, false},
		{[]string{"Bearer abc", "Bearer abc"}, "", true, false},
		{[]string{"Bearer ab\x00c"}, "", true, false},
	} {
		h := http.Header{}
		for _, v := range c.header {
			h.Add("Authorization", v)
		}
		tok, present, err := authn.Token(h)
		if tok != c.token || present != c.present || (err == nil) != c.ok {
			t.Errorf("Token(%q) = %q, %v, %v; want %q, %v, ok=%v", c.header, tok, present, err, c.token, c.present, c.ok)
		}
	}
}

// FuzzToken: a token it returns is the header's tail, made of
// b64token bytes only, and the work is one pass over the header.
var b64token = regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)

func FuzzToken(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer   a+/=")
	f.Add("Bearer\t x")
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Authorization": {v}}
		tok, present, err := authn.Token(h)
		if !present {
			t.Fatal("a header was not seen")
		}
		if err != nil {
			if tok != "" {
				t.Fatalf("token %q with an error", tok)
			}
			return
		}
		if !strings.HasSuffix(v, " "+tok) || !strings.EqualFold(v[:6], "bearer") || strings.TrimLeft(v[6:], " ") != tok || !b64token.MatchString(tok) {
			t.Fatalf("Token(%q) = %q", v, tok)
		}
	})
}

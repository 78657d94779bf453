package log

import (
	"fmt"
	"strings"
)

// CheckHeaders refuses HTTP headers net/http would refuse to send, which
// would fail every request they go with (an OTLP export, a call to a url
// server): a name that is no HTTP token, a value with a control character
// (a line break, say). An error names the header, never its value, which
// may be a secret.
func CheckHeaders(h map[string]string) error {
	for k, v := range h {
		if !validHeaderKey(k) {
			return fmt.Errorf("header name %q is not an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", k)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
				return fmt.Errorf("the value of header %s holds a control character (a line break, say)", k)
			}
		}
	}
	return nil
}

// validHeaderKey reports whether k is an HTTP token (RFC 9110).
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

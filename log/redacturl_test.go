package log_test

// TestRedactURL: what log.RedactURL keeps of a URL, and of text that is
// not one.

import (
	"testing"

	"github.com/provlog/provlog/log"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://tsa.example/ts":                                         "https://tsa.example/ts",
		"http://user:S3cret@rekor.example:8080/api?x=1":                  "http://user:[redacted]@rekor.example:8080/api?[redacted]",
		"postgres://provlog:pw@db:5432/log?sslmode=disable&password=pw2": "postgres://provlog:[redacted]@db:5432/log?[redacted]",
		"https://APIKEY@idp.example/introspect":                          "https://[redacted]@idp.example/introspect",
		"http://x/introspect?gw_key=S3cret#frag":                         "http://x/introspect?[redacted]#[redacted]",
		"not a url :: user:pw@host?password=x":                           "[redacted]@host?[redacted]",
		"user:pw@host/db":                                                "[redacted]@host/db",
		// libpq's keyword/value form of a connection string: every
		// keyword's value, quoted or not, spaces around '=' or not.
		"host=/tmp user=u password=S3cret dbname=x":     "host=[redacted] user=[redacted] password=[redacted] dbname=[redacted]",
		"password = 'S3 cret' host=db":                  "password=[redacted] host=[redacted]",
		"dbname=x password='it\\'s S3cret' sslmode=off": "dbname=[redacted] password=[redacted] sslmode=[redacted]",
	} {
		if got := log.RedactURL(in); want != "" && got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

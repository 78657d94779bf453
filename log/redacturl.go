package log

import (
	"encoding/base64"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// RedactURL returns a URL as it may leave the process (an error, a log
// line, a metric label, a status answer): without a password, a user
// name given alone (an API key more often than a name), the query and the
// fragment, which are where credentials go when an endpoint wants them in
// its URL (a gateway's ?key=, a DSN's ?password=). It is the one place
// the sidecar's URLs are redacted. Text that does not parse as a URL with
// a scheme keeps only what comes before any '?' or '#', loses what comes
// before an '@', and the value of every keyword=value in it (libpq's
// other form of a connection string, "host=db password=...").
func RedactURL(s string) string {
	const gone = "[redacted]"
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		s = keywordValue.ReplaceAllString(s, "${1}="+gone)
		rest, query := s, ""
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest, query = rest[:i], rest[i:i+1]+gone
		}
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			start := strings.Index(rest, "://")
			if start < 0 || start > i {
				start = -3
			}
			rest = rest[:start+3] + gone + rest[i:]
		}
		return rest + query
	}
	red := u.Scheme + "://"
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			red += url.User(u.User.Username()).String() + ":" + gone + "@"
		} else {
			red += gone + "@"
		}
	}
	red += u.Host + u.EscapedPath()
	if u.RawQuery != "" || u.ForceQuery {
		red += "?" + gone
	}
	if u.Fragment != "" {
		red += "#" + gone
	}
	return red
}

// URLCredentials returns the credentials the URL s carries, as RedactURL
// takes them: its password, or its user name given alone, and its
// query's values (as written and unescaped). A caller that sends to s
// cuts them out of what the other end answers (an echo of the key it was
// sent) before it is written.
func URLCredentials(s string) []string {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return nil
	}
	var out []string
	if pw, ok := u.User.Password(); ok {
		// net/http sends them as basic auth, base64 of user:password.
		out = append(out, pw, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)))
	} else if u.User != nil {
		out = append(out, u.User.Username())
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok && v != "" {
			out = append(out, v)
			if un, err := url.QueryUnescape(v); err == nil && un != v {
				out = append(out, un)
			}
		}
	}
	return out
}

// CutCredentials returns s with every one of creds in it (of
// URLCredentials, HeaderCredentials) replaced by "[redacted]", the
// longest first: a text the other end of a request wrote (an error page)
// may quote the credentials it was sent.
func CutCredentials(s string, creds []string) string {
	creds = slices.Clone(creds)
	slices.SortFunc(creds, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, c := range creds {
		if c != "" {
			pairs = append(pairs, c, "[redacted]")
		}
	}
	if pairs == nil {
		return s
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// HeaderCredentials returns the credentials a header's value v carries:
// v, and without its scheme ("Bearer ...", "Basic ...") the rest.
func HeaderCredentials(v string) []string {
	out := []string{v}
	if _, cred, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
		out = append(out, strings.TrimSpace(cred))
	}
	return out
}

// keywordValue matches a keyword and its value in libpq's keyword/value
// form: spaces around '=' or not, the value up to a space or quoted in
// single quotes (a backslash escaping a quote or a backslash).
var keywordValue = regexp.MustCompile(`(\w+)\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)`)

// RedactURLError returns err with the URL a net/http error repeats whole
// redacted as RedactURL does (Go hides a password in it, but not a user
// name given alone or the query); any other error as it is.
func RedactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		c := *ue
		c.URL = RedactURL(ue.URL)
		return &c
	}
	return err
}

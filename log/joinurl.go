package log

import (
	"fmt"
	"net/url"
	"strings"
)

// JoinURL returns the URL of ref, a path with or without a query of its
// own ("checkpoint", "proof/inclusion?index=3"), under base, a service's
// URL that may carry a query (an API key a gateway wants): base's path
// and ref's joined by one slash, and base's query followed by ref's. It
// is the one place a configured base URL gets a path; appending to the
// string instead puts the path inside the query (/?k=K/api/v1/...).
// ref "" gives base with its path ending in a slash. An error names base
// redacted (RedactURL).
func JoinURL(base, ref string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("URL %q does not parse", RedactURL(base))
	}
	r, err := url.Parse(ref)
	if err != nil || r.Scheme != "" || r.Host != "" || r.User != nil {
		return "", fmt.Errorf("%q is not a path", ref)
	}
	esc := strings.TrimSuffix(u.EscapedPath(), "/") + "/" + strings.TrimPrefix(r.EscapedPath(), "/")
	p, err := url.PathUnescape(esc)
	if err != nil {
		return "", fmt.Errorf("URL %q: %w", RedactURL(base), err)
	}
	u.Path, u.RawPath, u.Fragment, u.RawFragment = p, esc, "", ""
	switch {
	case u.RawQuery == "":
		u.RawQuery = r.RawQuery
	case r.RawQuery != "":
		u.RawQuery += "&" + r.RawQuery
	}
	u.ForceQuery = false
	return u.String(), nil
}

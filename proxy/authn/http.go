package authn

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// MetadataPath is where the protected resource metadata is served (RFC
// 9728 §3), also with the resource's path appended (§3.1).
const MetadataPath = "/.well-known/oauth-protected-resource"

// MetadataURL returns the URL of the protected resource metadata, for
// the resource_metadata parameter of challenges: the resource's origin,
// MetadataPath, and the resource's path (RFC 9728 §3.1). It is "" without
// a configured resource.
func (a *Authenticator) MetadataURL() string {
	res := a.Config().Resource
	u, err := url.Parse(res)
	if res == "" || err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + MetadataPath + strings.TrimSuffix(u.EscapedPath(), "/")
}

// metadata is the protected resource metadata document (RFC 9728 §2).
type metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata serves the protected resource metadata (RFC 9728): the
// resource, the trusted issuers as authorization servers, the scopes of
// every tool group, and the one bearer method, the header, as the
// config is when asked. Mount it at
// MetadataPath and MetadataPath + "/" (the path-suffixed form of §3.1).
// Without issuers it answers 404: the sidecar takes static tokens only.
func (a *Authenticator) Metadata() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := a.st.Load()
		if !st.cfg.Enabled() {
			http.Error(w, "provlog takes static bearer tokens only here: no auth: issuers are configured", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the protected resource metadata is read with GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		// Public facts a browser-based MCP client may read (RFC 9728 §3).
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Write(st.metadata)
	})
}

// Challenge returns the WWW-Authenticate value for err (RFC 6750 §3, RFC
// 9728 §5.1): "Bearer" with resource_metadata when a resource is
// configured, error and error_description when a token was sent, and the
// scopes needed for insufficient_scope.
func (a *Authenticator) Challenge(err error) string {
	var params []string
	if a.Config().Enabled() {
		params = append(params, `resource_metadata="`+quotable(a.MetadataURL())+`"`)
	}
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		params = append(params, `error="`+e.Code+`"`, `error_description="`+quotable(e.Description)+`"`)
		if e.Scope != "" {
			params = append(params, `scope="`+quotable(e.Scope)+`"`)
		}
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

// WriteError answers a request that err (from Request, Authenticate or
// Require) refused: its status, the challenge, and the description as
// text. The one place these errors become HTTP answers.
func (a *Authenticator) WriteError(w http.ResponseWriter, err error) {
	status, msg := http.StatusUnauthorized, err.Error()
	var e *Error
	if errors.As(err, &e) {
		status = e.Status
		if err == error(e) {
			msg = "provlog: " + e.Description
		} else {
			msg = "provlog: " + err.Error() // the caller said what it needs
		}
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		w.Header().Set("WWW-Authenticate", a.Challenge(err))
	}
	http.Error(w, msg, status)
}

// quotable makes s fit a quoted-string of a challenge parameter (RFC 6750
// §3: printable ASCII without '"' and '\').
func quotable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			c = '?'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Handlers below the sidecar's own (the log API, anchors, the auditor's
// view) decide themselves whether a request may read, through a
// func(*http.Request) bool, and answer a plain 401 when not. Authorizer
// and Challenger make those answers the same as everywhere else.

type verdictKey struct{}

// verdict is what Authorizer found for a request, for Challenger.
type verdict struct{ err error }

// Authorizer returns the check such handlers take: whether r's token
// authenticates and may use group g. Under [Authenticator.Challenger] it
// notes why not, so that the handler's 401 becomes the right answer.
func (a *Authenticator) Authorizer(g Group) func(*http.Request) bool {
	return func(r *http.Request) bool {
		id, err := a.Request(r)
		if err == nil {
			err = a.Require(id, g)
		}
		if v, ok := r.Context().Value(verdictKey{}).(*verdict); ok {
			v.err = err
		}
		return err == nil
	}
}

// Challenger wraps a handler that uses [Authenticator.Authorizer]: a 401
// it answers for a token that failed is replaced by
// [Authenticator.WriteError]'s answer for the reason the authorizer found
// (401 invalid_token, or 403 insufficient_scope); any other 401 keeps its
// body and gets the challenge header.
func (a *Authenticator) Challenger(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := &verdict{}
		r = r.WithContext(context.WithValue(r.Context(), verdictKey{}, v))
		next.ServeHTTP(&challengeWriter{ResponseWriter: w, a: a, v: v}, r)
	})
}

type challengeWriter struct {
	http.ResponseWriter
	a       *Authenticator
	v       *verdict
	replied bool // the answer was replaced: drop the handler's body
}

func (c *challengeWriter) WriteHeader(status int) {
	if status != http.StatusUnauthorized || c.replied {
		c.ResponseWriter.WriteHeader(status)
		return
	}
	err := c.v.err
	if err == nil || err == ErrNoToken {
		// No token: the handler's own answer says what it needs.
		c.ResponseWriter.Header().Set("WWW-Authenticate", c.a.Challenge(ErrNoToken))
		c.ResponseWriter.WriteHeader(status)
		return
	}
	c.replied = true
	c.ResponseWriter.Header().Del("Content-Length")
	c.a.WriteError(c.ResponseWriter, err)
}

func (c *challengeWriter) Write(b []byte) (int, error) {
	if c.replied {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

func (c *challengeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

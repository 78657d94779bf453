package hydratest

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// User and Password are the one person the login app signs in, and the
// password its form wants.
const (
	User     = "alice"
	Password = "correct horse battery staple"
)

// loginForm is the login app's sign-in page. Error is what went wrong
// with the last try, if anything.
var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in</title></head>
<body><h1>Sign in</h1>{{if .Error}}<p role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="login_challenge" value="{{.Challenge}}">
<label>Username <input name="username" autocomplete="username"></label>
<label>Password <input type="password" name="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button>
</form></body></html>
`))

// startLogin serves Hydra's login and consent endpoints on a loopback
// port until t ends and returns their URLs. Hydra leaves both to the
// deployment ("login and consent app"). Its login endpoint is a sign-in
// form: it accepts Hydra's login request for [User] once the form is
// posted with User's [Password], and shows the form again, with an
// error, for any other username or password (Hydra's request stays
// open). Its consent endpoint grants the scopes and audience the client
// requested. Each answers a success with a redirect back to Hydra.
func (s *Server) startLogin(t testing.TB) (login, consent string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		showLogin(w, r.URL.Query().Get("login_challenge"), "", http.StatusOK)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		ch := r.PostFormValue("login_challenge")
		user, pass := r.PostFormValue("username"), r.PostFormValue("password")
		// Both compared in constant time, and both always compared.
		okUser := subtle.ConstantTimeCompare([]byte(user), []byte(User))
		okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(Password))
		if okUser&okPass != 1 {
			s.mu.Lock()
			s.refusedLogins++
			s.mu.Unlock()
			showLogin(w, ch, "Wrong username or password.", http.StatusUnauthorized)
			return
		}
		var to redirect
		if err := s.adminCall(http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(ch),
			map[string]any{"subject": User}, &to); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		s.mu.Lock()
		s.logins++
		s.mu.Unlock()
		http.Redirect(w, r, to.RedirectTo, http.StatusSeeOther)
	})
	mux.HandleFunc("GET /consent", func(w http.ResponseWriter, r *http.Request) {
		q := "?consent_challenge=" + url.QueryEscape(r.URL.Query().Get("consent_challenge"))
		var req struct {
			Scope    []string `json:"requested_scope"`
			Audience []string `json:"requested_access_token_audience"`
		}
		var to redirect
		err := s.adminCall(http.MethodGet, "/admin/oauth2/auth/requests/consent"+q, nil, &req)
		if err == nil {
			err = s.adminCall(http.MethodPut, "/admin/oauth2/auth/requests/consent/accept"+q,
				map[string]any{"grant_scope": req.Scope, "grant_access_token_audience": req.Audience}, &to)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		s.mu.Lock()
		s.consents++
		s.mu.Unlock()
		http.Redirect(w, r, to.RedirectTo, http.StatusFound)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + l.Addr().String()
	return base + "/login", base + "/consent"
}

type redirect struct {
	RedirectTo string `json:"redirect_to"`
}

func showLogin(w http.ResponseWriter, challenge, problem string, status int) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	loginForm.Execute(w, struct{ Challenge, Error string }{challenge, problem})
}

// Logins returns how many sign-ins and consent requests the login app
// accepted, and how many sign-ins it refused (a wrong username or
// password).
func (s *Server) Logins() (logins, consents, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins, s.consents, s.refusedLogins
}

// adminCall calls Hydra's admin API with a JSON body, decoding the
// answer into out (when not nil); any status but 2xx is an error.
func (s *Server) adminCall(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.Admin+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("hydra admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("hydra admin %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("hydra admin %s %s: %v: %s", method, path, err, b)
		}
	}
	return nil
}

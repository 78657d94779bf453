package hydratest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// User is the one person the login app signs in.
const User = "alice"

// startLogin serves Hydra's login and consent endpoints on a loopback
// port until t ends and returns their URLs. Hydra leaves both to the
// deployment ("login and consent app"); this one stands for a person
// who signs in as [User] and consents to everything asked: its login
// endpoint accepts Hydra's login request for User, its consent endpoint
// grants the scopes and audience the client requested. Each answers
// with a redirect back to Hydra, as a browser would follow it.
func (s *Server) startLogin(t testing.TB) (login, consent string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		ch := r.URL.Query().Get("login_challenge")
		var to redirect
		if err := s.adminCall(http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(ch),
			map[string]any{"subject": User}, &to); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		s.mu.Lock()
		s.logins++
		s.mu.Unlock()
		http.Redirect(w, r, to.RedirectTo, http.StatusFound)
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

// Logins and Consents are how many login and consent requests the login
// app accepted.
func (s *Server) Logins() (logins, consents int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins, s.consents
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

package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path, token string) (*http.Response, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Result(), string(b)
}

func TestHandlerServesThePage(t *testing.T) {
	h := Handler(Info{VKey: "example.org/log+01234567+AQ==", Source: "sidecar"})
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/ui/", "text/html", `id="verdict"`},
		{"/ui/app.js", "text/javascript", "verifyEntry"},
		{"/ui/verify.js", "text/javascript", "rootFromInclusion"},
		{"/ui/style.css", "text/css", "data-verified"},
		{"/ui/log.json", "application/json", `"vkey":"example.org/log+01234567+AQ=="`},
	} {
		resp, body := get(t, h, "GET", tc.path, "")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType) || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.contains, strings.Contains(body, tc.contains))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	var info Info
	_, body := get(t, h, "GET", "/ui/log.json", "")
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.Witnesses == nil {
		t.Errorf("log.json %s: %v; witnesses must be a list, not null", body, err)
	}
	if resp, _ := get(t, h, "GET", "/ui", ""); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, h, "POST", "/ui/", ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d", resp.StatusCode)
	}
	if resp, _ := get(t, h, "GET", "/ui/nothing.js", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nothing.js: %d", resp.StatusCode)
	}
}

func TestTaskHandler(t *testing.T) {
	type task struct {
		ID string `json:"task_id"`
	}
	lookup := func(_ context.Context, id string) (any, error) {
		switch id {
		case "t_1":
			return task{ID: id}, nil
		case "t_broken":
			return nil, errors.New("disk on fire")
		}
		return nil, ErrNoTask
	}
	h := TaskHandler(lookup, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer good" })
	for _, tc := range []struct {
		method, path, token string
		status              int
		body                string
	}{
		{"GET", "/log/task/t_1", "good", 200, `{"task_id":"t_1"}`},
		{"GET", "/log/task/t_1", "", 401, "reader token"},
		{"GET", "/log/task/t_1", "bad", 401, "reader token"},
		{"GET", "/log/task/t_2", "good", 404, "no such task"},
		{"GET", "/log/task/", "good", 404, "want /log/task/<task id>"},
		{"GET", "/log/task/t_1/x", "good", 404, "want /log/task/<task id>"},
		{"GET", "/log/task/t_1?x=1", "good", 404, "want /log/task/<task id>"},
		{"GET", "/log/task/t_broken", "good", 500, "looking up the task failed"},
		{"DELETE", "/log/task/t_1", "good", 405, "only GET and HEAD"},
	} {
		resp, body := get(t, h, tc.method, tc.path, tc.token)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("%s %s (token %q): %d %q; want %d with %q", tc.method, tc.path, tc.token, resp.StatusCode, body, tc.status, tc.body)
		}
		if strings.Contains(body, "disk on fire") {
			t.Errorf("%s: an internal error reached the client", tc.path)
		}
	}
}

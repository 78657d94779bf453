package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
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
		{"/ui/shown.js", "text/javascript", "export function shown"},
		{"/ui/read.js", "text/javascript", "export async function get"},
		{"/ui/anchors.js", "text/javascript", "export async function showAnchors"},
		{"/ui/confusables.js", "text/javascript", "export const lookalikeLetters"},
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

// TestPageKeepsToItself: every answer of the page's handler, errors too,
// forbids other origins, inline script, framing and sniffing, and the
// page's own files hold no inline script or style and no way of turning
// text into markup or code: what the log holds is shown as text.
func TestPageKeepsToItself(t *testing.T) {
	h := Handler(Info{VKey: "example.org/log+01234567+AQ==", Source: "sidecar"})
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/verify.js", "/ui/shown.js", "/ui/read.js", "/ui/anchors.js", "/ui/style.css", "/ui/log.json", "/ui/nothing.js", "/ui", "POST /ui/"} {
		method := "GET"
		if m, p, ok := strings.Cut(path, " "); ok {
			method, path = m, p
		}
		resp, _ := get(t, h, method, path, "")
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: Content-Security-Policy %q lacks %s", method, path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("%s %s: Content-Security-Policy %q allows unsafe script or style", method, path, csp)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s %s: %s %q, want %q", method, path, k, got, want)
			}
		}
	}
	// Every script of the page, each file the page may load.
	scripts, err := fs.Glob(static, "static/*.js")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("the page's scripts: %v %v", scripts, err)
	}
	files := map[string][]string{"static/index.html": {"<script>", "style=", "javascript:"}}
	for _, name := range scripts {
		files[name] = []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(", "setAttribute(\"on", "javascript:"}
	}
	for name, banned := range files {
		b, err := static.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range banned {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q", name, s)
			}
		}
		if m := regexp.MustCompile(`<[^>]*\son[a-z]+\s*=`).FindString(string(b)); m != "" {
			t.Errorf("%s has an inline event handler: %s", name, m)
		}
	}
}

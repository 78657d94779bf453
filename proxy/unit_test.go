package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"

	"github.com/provlog/provlog/log"
)

func TestRedactArgs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		fields  []string
		want    string
		secrets []string
	}{
		{``, []string{"a"}, `{}`, nil},
		{`null`, []string{"a"}, `{}`, nil},
		{`{"a":"x","b":1}`, nil, `{"a":"x","b":1}`, nil},
		{`{"password":"hunter22","user":"bob"}`, []string{"password"}, `{"password":"[redacted]","user":"bob"}`, []string{"hunter22", "68756e7465723232"}},
		{`{"deep":[{"k":{"password":{"x":"nested-secret"}}}],"n":1e400}`, []string{"password"}, `{"deep":[{"k":{"password":"[redacted]"}}],"n":1e400}`, []string{"nested-secret", "6e65737465642d736563726574"}}, // an object's names are redacted with it, but for names too short to scrub out
		{`{"password":{"s3cret-name":{"pw":"nested-secret"}}}`, []string{"password"}, `{"password":"[redacted]"}`, []string{"s3cret-name", "7333637265742d6e616d65", "nested-secret", "6e65737465642d736563726574"}},
		{`{"Password":"kept-as-is","password":12345678}`, []string{"password"}, `{"Password":"kept-as-is","password":"[redacted]"}`, []string{"12345678"}},
		{`{"token":"a\"b\u00e9cdef"}`, []string{"token"}, `{"token":"[redacted]"}`, []string{"a\"bécdef", `a\"bécdef`, `a\"b\u00e9cdef`, `a\"b\u00E9cdef`, "612262c3a963646566", "a%22b%C3%A9cdef", // and ASCII-only JSON, hex, URL-encoded
			"a\"be\u0301cdef", "a\\\"be\u0301cdef", `a\"be\u0301cdef`, `a\"be\u0301cdef`, "61226265cc8163646566", "a%22be%CC%81cdef"}}, // so too its NFD form, é as e and U+0301
		{`[{"token":"abcd"}]`, []string{"token"}, `[{"token":"[redacted]"}]`, []string{"abcd", "61626364"}},
		{`{"token":"ab"}`, []string{"token"}, `{"token":"[redacted]"}`, []string{"ab"}}, // too short to cut out: withholds what holds it
		{`{"pin":7}`, []string{"pin"}, `{"pin":"[redacted]"}`, []string{"7"}},
		{`{"token":""}`, []string{"token"}, `{"token":"[redacted]"}`, nil},
		{`{"b":"{\"token\": \"abcd\", \"n\": 1.50}","c":"{\"x\": 1}","d":"[{\"token\":1}"}`, []string{"token"}, `{"b":"{\"n\":1.50,\"token\":\"[redacted]\"}","c":"{\"x\": 1}","d":"[{\"token\":1}"}`, []string{"abcd", "61626364"}}, // a JSON text, written again only if redacted
		{`{"u":["https://x/?a=1&token=ab%2Fcd#token=f"]}`, []string{"token"}, `{"u":["https://x/?a=1&token=[redacted]#token=f"]}`, []string{"ab%2Fcd", "61622532466364", "ab%252Fcd", "ab/cd", "61622f6364", "ab%2Fcd"}},             // a URL's query
	} {
		v, secrets, err := redactArgs(json.RawMessage(tc.in), tc.fields, false)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := mustJSON(v); got != tc.want {
			t.Errorf("redactArgs(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if mustJSON(secrets) != mustJSON(tc.secrets) {
			t.Errorf("redactArgs(%s) secrets = %q, want %q", tc.in, secrets, tc.secrets)
		}
	}
	for _, bad := range []string{`{`, `{"a":1} {"b":2}`} {
		if _, _, err := redactArgs(json.RawMessage(bad), []string{"a"}, false); err == nil {
			t.Errorf("redactArgs(%s) succeeded", bad)
		}
	}
	if got := scrub(`refused "hunter22" for bob`, []string{"hunter22"}); got != `refused "[redacted]" for bob` {
		t.Errorf("scrub = %q", got)
	}
	// A secret too short to cut out withholds the whole text it is in.
	for in, want := range map[string]string{`refused "hunter22" for ab`: Withheld, `refused "hunter22" for bob`: `refused "[redacted]" for bob`} {
		if got := scrub(in, []string{"hunter22", "ab"}); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	// Case-insensitive matching, when configured.
	v, secrets, err := redactArgs(json.RawMessage(`{"Password":"one-1","PASSWORD":"two-2","pass":"kept"}`), []string{"password"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(v); got != `{"PASSWORD":"[redacted]","Password":"[redacted]","pass":"kept"}` || len(secrets) != 4 { // each with its hex
		t.Errorf("case-insensitive redaction = %s, secrets %q", got, secrets)
	}
}

func TestScrubJSON(t *testing.T) {
	secrets := []string{"SECRET-123", `quo\"te`, "4242"}
	for _, tc := range []struct{ in, want string }{
		{`{"content":[{"text":"Echo: SECRET-123","type":"text"}]}`, `{"content":[{"text":"Echo: [redacted]","type":"text"}]}`},
		{`{"SECRET-123":1,"n":4242,"m":42420,"k":424}`, `{"[redacted]":1,"k":424,"m":"[redacted]","n":"[redacted]"}`},
		{`{"a":"nothing here"}`, `{"a":"nothing here"}`},
	} {
		canon, err := log.Canonicalize([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := log.Canonicalize([]byte(tc.want))
		got, changed := scrubJSON(canon, secrets)
		if string(got) != string(want) || changed != (tc.in != tc.want) {
			t.Errorf("scrubJSON(%s) = %s, %v; want %s", tc.in, got, changed, want)
		}
		if c, err := log.Canonicalize(got); err != nil || string(c) != string(got) {
			t.Errorf("scrubJSON(%s) is not canonical: %s", tc.in, got)
		}
	}
	var r recentSecrets
	for i := range maxRecentSecrets + 10 {
		r.remember([]string{fmt.Sprintf("secret-%04d", i)})
	}
	if got := r.scrub("a secret-0005 and secret-0265"); got != "a secret-0005 and [redacted]" {
		t.Errorf("recentSecrets.scrub = %q (keeps the latest %d)", got, maxRecentSecrets)
	}
}

func TestCheckServers(t *testing.T) {
	empty, custom, own := "", "x_", "provlog__"
	ok := []ServerConfig{
		{ID: "everything", Command: []string{"npx", "x"}, Redact: []string{"password"}, Retain: "full"},
		{ID: "remote.api-2", URL: "https://mcp.example.org/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
		{ID: "a", Command: []string{"a"}, Prefix: &empty},
		{ID: "b", Command: []string{"b"}, Prefix: &empty},
		{ID: "c", Command: []string{"c"}, Prefix: &custom, Protocol: "2026-07-28"},
		{ID: "d", Command: []string{"d"}, Protocol: "2025-11-25"},
	}
	if err := CheckServers(ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    []ServerConfig
		want string
	}{
		{"bad id", []ServerConfig{{ID: "My_Server", Command: []string{"x"}}}, "lowercase"},
		{"reserved id", []ServerConfig{{ID: "provlog", Command: []string{"x"}}}, "reserved"},
		{"both", []ServerConfig{{ID: "a", Command: []string{"x"}, URL: "http://h/mcp"}}, "not both"},
		{"neither", []ServerConfig{{ID: "a"}}, "set command"},
		{"bad url", []ServerConfig{{ID: "a", URL: "ftp://h"}}, "not an http"},
		{"retain", []ServerConfig{{ID: "a", Command: []string{"x"}, Retain: "all"}}, "retain"},
		{"dup id", []ServerConfig{{ID: "a", Command: []string{"x"}}, {ID: "a", Command: []string{"y"}}}, "twice"},
		{"dup prefix", []ServerConfig{{ID: "a", Command: []string{"x"}, Prefix: &custom}, {ID: "b", Command: []string{"y"}, Prefix: &custom}}, "share the prefix"},
		{"own prefix", []ServerConfig{{ID: "a", Command: []string{"x"}, Prefix: &own}}, "overlaps"},
		{"empty redact", []ServerConfig{{ID: "a", Command: []string{"x"}, Redact: []string{""}}}, "empty field"},
		{"protocol", []ServerConfig{{ID: "a", Command: []string{"x"}, Protocol: "2025-06-18"}}, `protocol "2025-06-18"`},
	} {
		err := CheckServers(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// The config shape of DESIGN §4 decodes into ServerConfig.
func TestServerConfigYAML(t *testing.T) {
	const doc = `
- id: everything
  command: [npx, -y, "@modelcontextprotocol/server-everything", stdio]
  env: {}
  redact: [password, api_key]
  retain: hash
  prefix: ""
  timeout: 90s
- id: remote
  url: https://mcp.example.org/mcp
  headers: {Authorization: "Bearer abc"}
`
	var s []ServerConfig
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if err := CheckServers(s); err != nil {
		t.Fatal(err)
	}
	if s[0].Prefix == nil || *s[0].Prefix != "" || s[0].timeout().String() != "1m30s" || s[0].Redact[1] != "api_key" {
		t.Errorf("first server: %+v", s[0])
	}
	if s[1].Prefix != nil || s[1].toolPrefix() != "remote__" || s[1].uriPrefix() != "remote+" || s[1].timeout() != DefaultTimeout {
		t.Errorf("second server: %+v", s[1])
	}
}

// The HTTP capture reads results out of SSE and JSON bodies exactly as
// sent, however the bytes are split.
func TestCaptureBodies(t *testing.T) {
	result := `{"content":[{"type":"text","text":"a\nb"}],  "z":1,"a":2}`
	msg := `{"jsonrpc":"2.0","id":7,"result":` + result + `}`
	head := len(`{"jsonrpc":"2.0","id":7,"result":`) // a data line break between tokens
	id, _ := jsonrpc.MakeID(float64(7))
	for _, tc := range []struct {
		name string
		body string
		wrap func(io.ReadCloser, *pendingCalls) io.ReadCloser
	}{
		{"sse", ": comment\r\nevent: message\r\nid: 1\r\ndata: " + msg + "\r\n\r\n", func(r io.ReadCloser, p *pendingCalls) io.ReadCloser { return &sseTee{ReadCloser: r, pending: p} }},
		{"sse split data", "data: " + msg[:head] + "\ndata:" + msg[head:] + "\n\n", func(r io.ReadCloser, p *pendingCalls) io.ReadCloser { return &sseTee{ReadCloser: r, pending: p} }},
		{"json", msg, func(r io.ReadCloser, p *pendingCalls) io.ReadCloser { return &jsonTee{ReadCloser: r, pending: p} }},
	} {
		var p pendingCalls
		cp := &capture{pending: &p, ids: []jsonrpc.ID{id}}
		p.m.Store(id, cp)
		r := tc.wrap(io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.body))), &p)
		if _, err := io.ReadAll(r); err != nil {
			t.Fatal(err)
		}
		if got := string(cp.last()); got != result {
			t.Errorf("%s: captured %q, want %q", tc.name, got, result)
		}
	}
}

// A panic in any handler becomes a JSON-RPC error; the proxy lives on.
func TestPanicGuard(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, nil, nil)
	p.Server().AddTool(&mcp.Tool{Name: "boom", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("boom") })
	cs := connectMemory(t, p, nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "boom"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError {
		t.Fatalf("panicking tool: %v", err)
	}
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolStatus}); err != nil || res.IsError {
		t.Fatalf("after the panic: %v", err)
	}
}

package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// escapedEchoes are a server's JSON texts quoting v with a character of
// it written as a JSON escape: its first letter as \u0053 (as an encoder
// escaping more than it must writes it), and every '/' as \/ (PHP's
// json_encode), and the two in a JSON text inside a JSON text.
func escapedEchoes(v string) []string {
	first := fmt.Sprintf(`\u%04X`, v[0]) + v[1:]
	slash := strings.ReplaceAll(v, "/", `\/`)
	inner, _ := json.Marshal(`{"v":"` + first + `"}`)
	return []string{`{"v":"` + first + `"}`, `{"v":"` + slash + `"}`, `{"doc":` + string(inner) + `}`}
}

// TestRedactedValueJSONEscapedScrubbed: a server that quotes a redacted
// value in a JSON text with some of its characters written as JSON
// escapes (in a result's text, in an error's message) does not get it
// into the call's entries, its kept result or the sidecar's log.
func TestRedactedValueJSONEscapedScrubbed(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "escaper", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Token string `json:"token"`
			Fail  bool   `json:"fail"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		echoes := escapedEchoes(a.Token)
		if a.Fail {
			return nil, &jsonrpc.Error{Code: -32001, Message: "refused " + strings.Join(echoes, " ")}
		}
		var content []mcp.Content
		for _, e := range echoes {
			content = append(content, &mcp.TextContent{Text: e})
		}
		return &mcp.CallToolResult{Content: content}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "es", URL: down.URL, Redact: []string{"token"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	var texts []string
	for _, v := range []string{"Sq-Escaped-Secret-93x", "sk/esc/Secret-44"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "es__login", Arguments: map[string]any{"token": v}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), v[1:6]) {
			t.Fatalf("login: %v %s", err, mustJSON(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "es__login", Arguments: map[string]any{"token": v, "fail": true}}); err == nil {
			t.Fatal("failing login succeeded")
		}
		// What the value's characters after the escape are, as any
		// text holds them: its own and escaped again.
		tail := v[1:]
		if i := strings.LastIndexByte(v, '/'); i > 0 {
			tail = v[i+1:]
		}
		texts = append(texts, tail)
	}
	writtenNowhere(t, l, &logs, texts)
}

// FuzzJSONUnescaped: jsonUnescaped reads the inside of a valid JSON
// string of UTF-8 as encoding/json does (but for a surrogate's escape,
// which it reads as one only in a pair), never panics on any text, and never lengthens one.
func FuzzJSONUnescaped(f *testing.F) {
	for _, s := range []string{`\u0053ECRET`, `sk\/a\\u0041`, `\ud83d\ude00 \ud83d`, `\u12`, `a\`, `\"\n\t`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u := jsonUnescaped(s)
		if len(u) > len(s) {
			t.Fatalf("%q read as %q, longer", s, u)
		}
		var want string
		if !utf8.ValidString(s) || json.Unmarshal([]byte(`"`+s+`"`), &want) != nil || strings.Contains(s, `\uD`) || strings.Contains(s, `\ud`) {
			return
		}
		if u != want {
			t.Fatalf("%q read as %q, encoding/json reads %q", s, u, want)
		}
	})
}

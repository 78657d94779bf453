package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mixedCase returns v with its ASCII letters' cases alternating, from
// upper if upper, and its other characters as they are: S3CRET-Up1 as
// s3CrEt-uP1 or S3cReT-Up1.
func mixedCase(v string, upper bool) string {
	b := []byte(v)
	for i, c := range b {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			if upper {
				b[i] = c &^ 0x20
			} else {
				b[i] = c | 0x20
			}
			upper = !upper
		}
	}
	return string(b)
}

// TestRedactedValueMixedCaseBase64Scrubbed: a server that changes the
// case of some of a redacted value's letters and not others (a token
// made of it by a case-insensitive store, a value typed back) and then
// sends it as base64, in either alphabet, does not get it into the
// call's entries, its kept result, its error text or the sidecar's log,
// as base64 of the value upper- or lower-cased does not
// (TestRedactedValueCaseBase64Scrubbed).
func TestRedactedValueMixedCaseBase64Scrubbed(t *testing.T) {
	encodings := func(v string) []string {
		var out []string
		for _, c := range []string{mixedCase(v, false), mixedCase(v, true)} {
			out = append(out, base64.StdEncoding.EncodeToString([]byte(c)), base64.RawURLEncoding.EncodeToString([]byte("\x00"+c)))
		}
		return out
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mixed64", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Password string `json:"password"`
			Fail     bool   `json:"fail"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		enc := encodings(a.Password)
		if a.Fail {
			return nil, &jsonrpc.Error{Code: -32001, Message: "refused token " + strings.Join(enc, " ")}
		}
		content := []mcp.Content{}
		for _, e := range enc {
			content = append(content, &mcp.TextContent{Text: "token: " + e})
		}
		return &mcp.CallToolResult{Content: content, StructuredContent: map[string]any{"tokens": enc}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "m6", URL: down.URL, Redact: []string{"password"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	values := []string{"S3CRET-Up1-b64", "S3CRET-Caf\u00e9-\u03c3\u0394-k2", "skMixedCaseTokenAbcdef"}
	var texts []string
	for _, v := range values {
		enc := encodings(v)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "m6__login", Arguments: map[string]any{"password": v}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), enc[0]) {
			t.Fatalf("login: %v %s", err, mustJSON(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "m6__login", Arguments: map[string]any{"password": v, "fail": true}}); err == nil || !strings.Contains(err.Error(), enc[2]) {
			t.Fatalf("failing login: %v", err)
		}
		texts = append(texts, enc...)
	}
	writtenNowhere(t, l, &logs, texts)
}

// FuzzCoreFilter: holdsCore finds a core read case-blind wherever a
// search of each core at each offset finds it, and nowhere else; and
// base64 of a value with any of its ASCII letters' cases changed, at any
// offset in either alphabet inside a text, is found by decodesToSecret.
func FuzzCoreFilter(f *testing.F) {
	f.Add("S3CRET-Up1", "token: ", uint64(0x5a5a), uint8(1), false)
	f.Add("skMixedCaseTokenAbcdef", "", uint64(0xffff), uint8(2), true)
	f.Add("abcd", "\xff==", uint64(3), uint8(0), false)
	f.Fuzz(func(t *testing.T, secret, around string, flips uint64, off uint8, url bool) {
		if len(secret) < minSecretLen || len(secret) > 64 {
			return
		}
		secrets := []string{secret}
		cores := base64Cores(secrets)
		filter := newCoreFilter(cores, 0)
		naive := func(s string) bool {
			for _, c := range cores {
				for i := 0; i+len(c) <= len(s); i++ {
					same := true
					for j := range len(c) {
						if caseBlind[s[i+j]] != caseBlind[c[j]] {
							same = false
							break
						}
					}
					if same {
						return true
					}
				}
			}
			return false
		}
		if got, want := holdsCore(filter, around), naive(around); got != want {
			t.Fatalf("holdsCore(%q) = %v, a search says %v", around, got, want)
		}
		b := []byte(secret)
		for i, c := range b {
			if ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') && flips>>(i%64)&1 == 1 {
				b[i] = c ^ 0x20
			}
		}
		enc := base64.StdEncoding
		if url {
			enc = base64.URLEncoding
		}
		e := enc.EncodeToString(append([]byte(strings.Repeat("\x00", int(off%3))), b...))
		s := around + " " + e + " " + around
		if !holdsCore(filter, s) {
			t.Fatalf("no core of %q found in %q", secret, s)
		}
		if !decodesToSecret(s, newCoreSet(cores), secrets) {
			t.Fatalf("base64 of %q (%q) not found in %q", b, e, s)
		}
	})
}

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/text/unicode/norm"
)

// inEachForm is s in each of Unicode's four normalization forms.
func inEachForm(s string) []string {
	return []string{norm.NFC.String(s), norm.NFD.String(s), norm.NFKC.String(s), norm.NFKD.String(s)}
}

// TestRedactedValueNormalFormsScrubbed: a server that echoes a redacted
// value in another Unicode normalization form than the client wrote it
// in (a macOS file name's NFD, a server that normalizes its input to NFC
// or NFKC) does not get it into the call's entries, its kept result or
// the sidecar's log: each form of the value is scrubbed as the value is.
// The client gets the server's answer as it was sent.
func TestRedactedValueNormalFormsScrubbed(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "norms", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Password string `json:"password"`
			Fail     bool   `json:"fail"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		text := "as normalized: " + strings.Join(inEachForm(a.Password), " ")
		if a.Fail {
			return nil, &jsonrpc.Error{Code: -32001, Message: "refused " + text}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: map[string]any{"seen": inEachForm(a.Password)}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "nf", URL: down.URL, Redact: []string{"password"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	// Decomposed (é as e and a combining acute), and composed with a
	// compatibility character (the ligature ﬁ, "fi" in NFKC).
	values := []string{"S3CRET-cafe\u0301-n1", "S3CRET-caf\u00e9-\ufb01x-n2"}
	for _, v := range values {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nf__login", Arguments: map[string]any{"password": v}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), norm.NFC.String(v)) {
			t.Fatalf("login: %v %s", err, mustJSON(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nf__login", Arguments: map[string]any{"password": v, "fail": true}}); err == nil || !strings.Contains(err.Error(), norm.NFKC.String(v)) {
			t.Fatalf("failing login: %v", err)
		}
	}
	var forms []string
	for _, v := range values {
		forms = append(forms, inEachForm(v)...)
	}
	slices.Sort(forms)
	forms = slices.Compact(forms)
	writtenNowhere(t, l, &logs, forms)
}

// writtenNowhere fails t for each of texts in an entry of l, a blob of
// it (a kept result) or the proxy's log lines logs.
func writtenNowhere(t *testing.T, l *testLog, logs *lockedBuf, texts []string) {
	t.Helper()
	for i := uint64(0); i < l.size(t); i++ {
		for _, f := range texts {
			if bytes.Contains(l.entry(t, i), []byte(f)) {
				t.Errorf("entry %d holds %q: %s", i, f, l.entry(t, i))
			}
		}
	}
	filepath.WalkDir(l.blobDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, f := range texts {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("kept result %s holds %q: %s", filepath.Base(path), f, b)
			}
		}
		return nil
	})
	for _, f := range texts {
		if strings.Contains(logs.String(), f) {
			t.Errorf("the proxy's log holds %q", f)
		}
	}
}

// TestRedactedValueCaseScrubbed: a server that echoes a redacted value
// in another case than the client wrote it in (upper, lower, or with
// each letter's case changed, ASCII and not: S3CRET-Up1 as S3CRET-UP1)
// does not get it into the call's entries, its kept result, its error
// text or the sidecar's log: the value is matched under Unicode simple
// case folding. Each was kept as the server wrote it.
func TestRedactedValueCaseScrubbed(t *testing.T) {
	variants := func(v string) []string {
		swapped := []rune(v)
		for i, r := range swapped {
			if unicode.IsUpper(r) {
				swapped[i] = unicode.ToLower(r)
			} else {
				swapped[i] = unicode.ToUpper(r)
			}
		}
		return []string{strings.ToUpper(v), strings.ToLower(v), string(swapped)}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cases", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Password string `json:"password"`
			Fail     bool   `json:"fail"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		text := "as cased: " + strings.Join(variants(a.Password), " ")
		if a.Fail {
			return nil, &jsonrpc.Error{Code: -32001, Message: "refused " + text}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: map[string]any{"seen": variants(a.Password)}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "cs", URL: down.URL, Redact: []string{"password"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	values := []string{"S3CRET-Up1", "S3CRET-Caf\u00e9-\u03c3\u0394-k2"}
	var texts []string
	for _, v := range values {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cs__login", Arguments: map[string]any{"password": v}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), strings.ToUpper(v)) {
			t.Fatalf("login: %v %s", err, mustJSON(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cs__login", Arguments: map[string]any{"password": v, "fail": true}}); err == nil || !strings.Contains(err.Error(), strings.ToLower(v)) {
			t.Fatalf("failing login: %v", err)
		}
		texts = append(texts, variants(v)...)
	}
	writtenNowhere(t, l, &logs, texts)
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/otlp/otlptest"
)

// The redacted values of TestRedactedValuesElsewhereWrittenNowhere.
const (
	foldSecret    = "fold-Secret-4711x"
	confirmSecret = "confirm-Secret-93kq"
	escSecret     = "esc-Secret/c3d8e"
	urlSecret     = "url-Secret-3a9d5"
	bodySecret    = "body-Secret-72c0e"
	complSecret   = "compl-Secret-61be"
	contextSecret = "context-Secret-f09"
)

// TestRedactedValuesElsewhereWrittenNowhere: a client that knows the
// redact list cannot get a redacted value written by putting it where
// the list does not name it. Under redact_ignore_case, a member named
// "ſecret" (long s) is the server's "secret" (encoding/json, as Go
// servers decode their arguments, folds it so, and so does
// strings.EqualFold), so it is redacted too; and a value redacted under
// one member and sent again under another ("token_confirm", as a
// sign-up form repeats a password, or a note) in the same call or a
// later one is not kept in the call entry either, nor one in the query
// of a URL an argument holds, under a name the list names, as a
// resource URI's is redacted, nor one under such a name in a JSON text
// an argument holds (a request body). A value written with
// JSON's escapes is scrubbed as written from what the server echoes
// of it raw, and a completion's argument and context arguments the list
// names are redacted values too, scrubbed from the server's stderr.
// Every byte the sidecar wrote is searched (searchWritten).
func TestRedactedValuesElsewhereWrittenNowhere(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	rcv := otlptest.Start(t)
	exe, _ := os.Executable()
	const token = "redact-hunt-token"
	sum := sha256.Sum256([]byte(token))
	data := filepath.Join(t.TempDir(), "data")
	cfg := fmt.Sprintf(`data: %s
origin: provlog.test/redacthunt
actors: [{id: alice, token_sha256: %s}]
log: {level: debug}
otel: {endpoint: %q}
servers:
  - id: lk
    command: [%q, "-test.run=^$"]
    env: {%s: "1"}
    redact: [token, secret]
    redact_ignore_case: true
    retain: full
`, data, hex.EncodeToString(sum[:]), rcv.URL, exe, leakfxEnv)
	cfgPath := writeFile(t, filepath.Join(t.TempDir(), "provlog.yaml"), []byte(cfg))
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { sp.stop(t) }) // SIGTERM flushes the spans
	defer stop()
	waitTools(t, sp.base, token, []string{"lk__echo"})
	cs := connectHTTP(t, sp.base, token)
	ctx := context.Background()
	trace := mcp.Meta{"traceparent": "00-" + otelParentTrace + "-" + otelParentSpan + "-01"}
	for _, args := range []string{
		`{"token":"tok-1-9f3e2a","ſecret":"` + foldSecret + `"}`,
		`{"token":"` + confirmSecret + `","token_confirm":"` + confirmSecret + `"}`,
		`{"token":"tok-2-77c1d0","note":"as before: ` + confirmSecret + `"}`,
		`{"token":"\u0065sc-Secret\/c3d8e"}`, // escSecret, escaped as JSON lets a client write it
		`{"token":"tok-3-e4b2f9","url":"https://api.test/v1?a=1&TOKEN=` + urlSecret + `#top"}`,
		`{"token":"tok-4-b81d3c","body":"{\"auth\": {\"Token\": \"` + bodySecret + `\"}}"}`,
	} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lk__echo", Arguments: json.RawMessage(args), Meta: trace}); err != nil {
			t.Fatalf("lk__echo %s: %v", args, err)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lk__fail", Arguments: json.RawMessage(`{"token":"\u0065sc-Secret\/c3d8e"}`), Meta: trace}); err == nil {
		t.Fatal("lk__fail succeeded")
	}
	prompt := map[string]string{"token": confirmSecret, "again": confirmSecret}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "lk__greet", Arguments: prompt, Meta: trace}); err != nil {
		t.Fatalf("lk__greet: %v", err)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "lk__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "Token", Value: complSecret},
		Context:  &mcp.CompleteContext{Arguments: map[string]string{"token": contextSecret}},
	}); err != nil {
		t.Fatalf("completing lk__greet: %v", err)
	}
	answers := provlogAnswers(t, cs, sp.base, token)
	stop()
	if !strings.Contains(sp.stderr.String(), "leakfx completing") {
		t.Fatal("the downstream's completion line is not on the sidecar's stderr: the test cannot tell that it is scrubbed")
	}
	searchWritten(t, sp, rcv, data, answers, leakForms(urlSecret, bodySecret, complSecret, contextSecret, foldSecret, confirmSecret, escSecret, `\u0065sc-Secret\/c3d8e`, `\\u0065sc-Secret\\/c3d8e`))
}

// mintSecret is the redacted value TestToolNamedForSecretWrittenNowhere's
// server names a tool after; asciiSecret one it quotes in JSON with its
// letters beyond ASCII escaped, as Python's json.dumps writes them.
const (
	mintSecret  = "mint-Secret-5c2e9"
	asciiSecret = "pässwörd-Secret-ü1"
	metaSecret  = "meta-Secret-0d4a7"
	readSecret  = "read-Secret-8e1c3"
)

// asciiJSON is v as JSON, every character beyond ASCII escaped (\u00e4).
func asciiJSON(v any) string {
	b, _ := json.Marshal(v)
	var sb strings.Builder
	for _, r := range string(b) {
		if r < 0x80 {
			sb.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&sb, `\u%04x`, u)
		}
	}
	return sb.String()
}

// TestToolNamedForSecretWrittenNowhere: a server that lists a tool, a
// prompt and a resource named after a redacted value a client sent it
// (here, at once: a tool "mint" that makes them of its token) does not
// get the value into the sidecar's tools entry, its log lines, its
// spans, or the entries of a call, a prompts/get and a resources/read of
// them. The client is shown the server's lists as they are. Nor does a
// server that quotes a redacted value in JSON of only ASCII ("ascii"),
// or echoes a call's or an earlier read's _meta, where a client put a
// member the list names ("meta"), get it into the result kept.
func TestToolNamedForSecretWrittenNowhere(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	rcv := otlptest.Start(t)
	const token = "redact-mint-token"
	sum := sha256.Sum256([]byte(token))
	obj := json.RawMessage(`{"type":"object"}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "mintfx", Version: "1"}, &mcp.ServerOptions{HasTools: true, HasPrompts: true, HasResources: true})
	echo := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "called " + req.Params.Name}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "mint", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := tokenOf(req.Params.Arguments)
		srv.AddTool(&mcp.Tool{Name: "t_" + tok, InputSchema: obj}, echo)
		srv.AddPrompt(&mcp.Prompt{Name: "p_" + tok}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "minted"}}}}, nil
		})
		srv.AddResource(&mcp.Resource{Name: "minted", URI: "mint:///" + tok}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "minted"}}}, nil
		})
		return echo(ctx, req)
	})
	srv.AddTool(&mcp.Tool{Name: "ascii", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad arguments: " + asciiJSON(args)}}}, nil
	})
	var lastRead atomic.Value // the _meta of the last read of memo:///
	srv.AddResource(&mcp.Resource{Name: "memo", URI: "memo:///"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		b, _ := json.Marshal(req.Params.Meta)
		lastRead.Store(string(b))
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "noted"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "meta", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(req.Params.Meta)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("your _meta: %s; the last read's: %v", b, lastRead.Load())}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer down.Close()
	data := filepath.Join(t.TempDir(), "data")
	cfg := fmt.Sprintf(`data: %s
origin: provlog.test/redactmint
actors: [{id: alice, token_sha256: %s}]
log: {level: debug}
otel: {endpoint: %q}
servers:
  - id: mh
    url: %s
    redact: [token]
    retain: full
`, data, hex.EncodeToString(sum[:]), rcv.URL, down.URL)
	cfgPath := writeFile(t, filepath.Join(t.TempDir(), "provlog.yaml"), []byte(cfg))
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { sp.stop(t) })
	defer stop()
	waitTools(t, sp.base, token, []string{"mh__mint"})
	cs := connectHTTP(t, sp.base, token)
	ctx := context.Background()
	trace := mcp.Meta{"traceparent": "00-" + otelParentTrace + "-" + otelParentSpan + "-01"}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mh__mint", Arguments: json.RawMessage(`{"token":"` + mintSecret + `"}`), Meta: trace}); err != nil {
		t.Fatalf("mh__mint: %v", err)
	}
	minted := "mh__t_" + mintSecret
	waitSessionTools(t, cs, []string{minted})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: minted, Meta: trace}); err != nil {
		t.Fatalf("%s: %v", minted, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, perr := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mh__p_" + mintSecret, Meta: trace})
		_, rerr := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mh+mint:///" + mintSecret, Meta: trace})
		if perr == nil && rerr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the minted prompt and resource: %v; %v", perr, rerr)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mh__ascii", Arguments: map[string]any{"token": asciiSecret}, Meta: trace}); err != nil {
		t.Fatalf("mh__ascii: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mh+memo:///", Meta: mcp.Meta{"token": readSecret}}); err != nil {
		t.Fatalf("reading mh+memo:///: %v", err)
	}
	meta := mcp.Meta{"token": metaSecret}
	maps.Copy(meta, trace)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mh__meta", Meta: meta}); err != nil {
		t.Fatalf("mh__meta: %v", err)
	}
	answers := provlogAnswers(t, cs, sp.base, token)
	stop()
	escaped := strings.Trim(asciiJSON(asciiSecret), `"`)
	searchWritten(t, sp, rcv, data, answers, leakForms(mintSecret, metaSecret, readSecret, asciiSecret, escaped, strings.ReplaceAll(escaped, `\`, `\\`)))
}

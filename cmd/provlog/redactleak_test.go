package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/otlp/otlptest"
)

// leakfxEnv makes the test binary run as a downstream that echoes every
// argument it gets in every place a server can put it (leakfx).
const leakfxEnv = "PROVLOG_LEAKFX"

// leakfxChild runs the echoing downstream if asked, reporting whether it
// did.
func leakfxChild() bool {
	if os.Getenv(leakfxEnv) == "" {
		return false
	}
	if err := leakfxServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	return true
}

// leakfxServer echoes what it is sent: in a result's text, as an
// image's and a blob's bytes (base64 on the wire), the token as base64
// broken into lines (indented or not) in a text and in a JSON text inside
// one, in member names of its structured content (plain, base64,
// wrapped), on stderr (base64 too, plain and wrapped), in a progress and
// a log notification, in a JSON-RPC error's message (base64 too, plain
// and wrapped) and data, in a tool error, in a read resource's contents
// and in a prompt; and it prints the completion requests it gets.
func leakfxServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "leakfx", Version: "1"}, &mcp.ServerOptions{HasTools: true,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			b, _ := json.Marshal(req.Params)
			fmt.Fprintln(os.Stderr, "leakfx completing", string(b))
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
		}})
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := string(req.Params.Arguments)
		tok := tokenOf(req.Params.Arguments)
		fmt.Fprintln(os.Stderr, "leakfx got", args)
		key, _ := json.Marshal(map[string]string{"key": mimeLines(tok, "\n  ")}) // one line
		fmt.Fprintln(os.Stderr, "leakfx key", base64.StdEncoding.EncodeToString([]byte(tok)), string(key))
		if tok := req.Params.GetProgressToken(); tok != nil {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "working on " + args})
		}
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Data: "leakfx got " + args})
		attachment, _ := json.Marshal(map[string]string{"attachment": mimeLines(tok, "\n")})
		indented, _ := json.MarshalIndent(map[string]string{"attachment": mimeLines(tok, "\n\t\t")}, "", "  ")
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "you sent " + args + "; see https://x.test/?q=" + url.QueryEscape(tok)},
			&mcp.ImageContent{MIMEType: "image/png", Data: []byte(args)},
			&mcp.ImageContent{MIMEType: "image/png", Data: []byte(tok)},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "leak:///args", MIMEType: "application/json", Blob: []byte(args)}},
			&mcp.TextContent{Text: "attached:\r\n" + mimeLines(tok, "\r\n")},
			&mcp.TextContent{Text: string(attachment)},
			&mcp.TextContent{Text: "pem: |\n  " + mimeLines(tok, "\r\n  ")},
			&mcp.TextContent{Text: string(indented)},
		}, StructuredContent: map[string]any{ // the token in member names
			tok: "plain", base64.StdEncoding.EncodeToString([]byte(tok)): "base64", mimeLines(tok, "\n"): "wrapped",
		}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := tokenOf(req.Params.Arguments)
		key := base64.StdEncoding.EncodeToString([]byte(tok))
		return nil, &jsonrpc.Error{Code: -32001, Data: req.Params.Arguments,
			Message: "refused " + string(req.Params.Arguments) + " at /v/" + url.PathEscape(tok) + " with key " + key + ", as sent:\n  " + mimeLines(tok, "\n  ")}
	})
	s.AddTool(&mcp.Tool{Name: "tool_error", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cannot use " + string(req.Params.Arguments)}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "leak", URITemplate: "leak:///{+p}"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if strings.Contains(req.Params.URI, "fail") {
			return nil, &jsonrpc.Error{Code: -32002, Message: "cannot read " + req.Params.URI}
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "read " + req.Params.URI}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "token"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "use " + req.Params.Arguments["token"]}}}}, nil
	})
	return s
}

// mimeLines is base64 of bytes holding s, in lines of 76 characters
// broken by brk as MIME breaks them; a break falls inside s's characters.
func mimeLines(s, brk string) string {
	e := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte{0xfb}, 50), s...))
	return e[:76] + brk + e[76:]
}

// tokenOf is the string value of the member of args named token in any
// case.
func tokenOf(args json.RawMessage) string {
	var named struct{ Token string }
	json.Unmarshal(args, &named)
	return named.Token
}

// The redacted values of TestRedactedValuesWrittenNowhere: a string with
// characters that URL encoding changes, one a resource URI carries and a
// number.
const (
	leakSecret    = "sk-Leak/91+q7Zx"
	leakURISecret = "uriSecret-5e8d1"
	leakNumber    = "84736251"
)

// leakForms are the texts the secrets could be written as.
func leakForms(secrets ...string) map[string]string {
	forms := map[string]string{}
	for _, s := range secrets {
		forms[s] = s
		encoded := map[string]string{"URL-encoded ": url.QueryEscape(s), "path-escaped ": url.PathEscape(s)}
		for k := range 3 {
			// The base64 characters of s's own bytes, at each offset.
			for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding} {
				e := enc.EncodeToString([]byte(strings.Repeat("\x00", k) + s))
				encoded[fmt.Sprintf("%s (offset %d) of ", name, k)] = e[min(k, 1)*4 : 4*((k+len(s))/3)]
			}
		}
		for name, f := range encoded {
			if f != s {
				forms[name+s] = f
			}
		}
	}
	return forms
}

// TestRedactedValuesWrittenNowhere runs the sidecar as a process with a
// downstream that echoes its arguments everywhere, the redact list
// matching fields in any case, results kept, debug logging, and traces
// exported to the OpenTelemetry Collector's receiver. It sends redacted
// values as strings, numbers, nested in arrays, in a resource URI's
// query and as a prompt's argument, then greps every byte provlog wrote
// (its data directory, Pebble files and blobs included; its stderr; the
// spans the collector received; the answers of /healthz, /metrics and
// provlog__status; an export bundle; tasks show) for them in every
// encoding. The client itself gets the server's answers as they are.
func TestRedactedValuesWrittenNowhere(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	rcv := otlptest.Start(t)
	exe, _ := os.Executable()
	const token = "redact-test-token"
	sum := sha256.Sum256([]byte(token))
	// The same server over HTTP, where its answers come as an SSE stream.
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return leakfxServer() }, nil))
	defer down.Close()
	data := filepath.Join(t.TempDir(), "data")
	cfg := fmt.Sprintf(`data: %s
origin: provlog.test/redact
actors: [{id: alice, token_sha256: %s}]
log: {level: debug}
otel: {endpoint: %q}
servers:
  - id: lk
    command: [%q, "-test.run=^$"]
    env: {%s: "1"}
    redact: [token]
    redact_ignore_case: true
    retain: full
  - id: lh
    url: %s
    redact: [token]
    redact_ignore_case: true
    retain: full
`, data, hex.EncodeToString(sum[:]), rcv.URL, exe, leakfxEnv, down.URL)
	cfgPath := writeFile(t, filepath.Join(t.TempDir(), "provlog.yaml"), []byte(cfg))
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { sp.stop(t) }) // SIGTERM flushes the spans
	defer stop()
	waitTools(t, sp.base, token, []string{"lk__echo", "lk__fail", "lk__tool_error", "lh__echo"})
	cs := connectHTTP(t, sp.base, token)
	ctx := context.Background()
	trace := mcp.Meta{"traceparent": "00-" + otelParentTrace + "-" + otelParentSpan + "-01"}
	args := json.RawMessage(`{"Token":"` + leakSecret + `","deep":[{"TOKEN":` + leakNumber + `}],"note":"kept"}`)
	for _, tool := range []string{"lk__echo", "lk__fail", "lk__tool_error", "lh__echo", "lh__fail", "lh__tool_error"} {
		meta := mcp.Meta{"progressToken": "p-" + tool}
		for k, v := range trace {
			meta[k] = v
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
		if strings.HasSuffix(tool, "__fail") {
			if err == nil || !strings.Contains(err.Error(), leakSecret) {
				t.Errorf("%s: %v; want the server's own error, as it sent it", tool, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if b, _ := json.Marshal(res); !bytes.Contains(b, []byte(leakSecret)) {
			t.Errorf("%s: the client got %s; want the server's answer as it sent it", tool, b)
		}
	}
	for _, id := range []string{"lk", "lh"} {
		uri := id + "+leak:///doc?x=1&TOKEN=" + leakURISecret
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri, Meta: trace}); err != nil {
			t.Fatalf("reading %s: %v", uri, err)
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: id + "+leak:///fail?token=" + leakURISecret, Meta: trace}); err == nil {
			t.Fatal("a read the server refuses succeeded")
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: id + "__greet", Arguments: map[string]string{"token": leakSecret}, Meta: trace}); err != nil {
			t.Fatalf("%s__greet: %v", id, err)
		}
	}
	answers := provlogAnswers(t, cs, sp.base, token)
	stop()
	if !bytes.Contains([]byte(sp.stderr.String()), []byte("leakfx got")) {
		t.Fatalf("the downstream's stderr is not on the sidecar's: the test cannot tell that it is scrubbed")
	}
	searchWritten(t, sp, rcv, data, answers, leakForms(leakSecret, leakURISecret, leakNumber))
}

// lineBreaks are line breaks and JSON's escapes of them, at any depth,
// with the indentation (spaces, tabs, escaped tabs) after them.
var lineBreaks = regexp.MustCompile(`(?:\\+[rn]|[\r\n])(?:[ \t\r\n]|\\+[rnt])*`)

// searchWritten greps every byte the stopped sidecar sp wrote (stderr,
// its answers, the spans rcv got, the data directory data, an export
// bundle of it and tasks list's output) for forms.
func searchWritten(t *testing.T, sp *fxSidecar, rcv *otlptest.Collector, data string, answers []byte, forms map[string]string) {
	t.Helper()
	ctx := context.Background()
	written := map[string][]byte{"stderr": []byte(sp.stderr.String()), "provlog's answers": answers}
	batches := rcv.Batches(t)
	if len(batches) == 0 {
		t.Fatalf("no spans reached the collector; the sidecar said: %s", sp.stderr.String())
	}
	written["OTLP export"] = bytes.Join(batches, nil)
	out := filepath.Join(t.TempDir(), "bundle")
	var cmdOut bytes.Buffer
	if code := run(ctx, []string{"export", "--data", data, "--out", out}, &cmdOut, &cmdOut); code != 0 {
		t.Fatalf("export: %s", cmdOut.String())
	}
	if code := run(ctx, []string{"tasks", "--data", data, "list"}, &cmdOut, &cmdOut); code != 0 {
		t.Fatalf("tasks list: %s", cmdOut.String())
	}
	written["export and tasks output"] = cmdOut.Bytes()
	for _, dir := range []string{data, out} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				written[path] = b
			}
			return nil
		})
	}
	for where, b := range written {
		// Base64 broken into lines is found with its line breaks (and
		// JSON's escapes of them, and the indentation after them) taken
		// out.
		unwrapped := lineBreaks.ReplaceAll(b, nil)
		for form, s := range forms {
			if i := bytes.Index(b, []byte(s)); i >= 0 {
				t.Errorf("%s holds %s: …%q…", where, form, b[max(0, i-80):min(len(b), i+len(s)+40)])
			} else if i := bytes.Index(unwrapped, []byte(s)); i >= 0 {
				t.Errorf("%s holds %s, broken into lines: …%q… (line breaks taken out)", where, form, unwrapped[max(0, i-80):min(len(unwrapped), i+len(s)+40)])
			}
		}
	}
}

// provlogAnswers is what provlog itself answers at base: provlog__status
// (to cs), /healthz and /metrics.
func provlogAnswers(t *testing.T, cs *mcp.ClientSession, base, token string) []byte {
	t.Helper()
	var answers bytes.Buffer
	status, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "provlog__status"})
	if err != nil {
		t.Fatalf("provlog__status: %v", err)
	}
	b, _ := json.Marshal(status)
	answers.Write(b)
	for _, path := range []string{"/healthz", "/metrics"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers.Write(body)
	}
	return answers.Bytes()
}

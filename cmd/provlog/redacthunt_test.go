package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/otlp/otlptest"
)

// The redacted values of TestRedactedValuesElsewhereWrittenNowhere.
const (
	foldSecret    = "fold-Secret-4711x"
	confirmSecret = "confirm-Secret-93kq"
)

// TestRedactedValuesElsewhereWrittenNowhere: a client that knows the
// redact list cannot get a redacted value written by putting it where
// the list does not name it. Under redact_ignore_case, a member named
// "ſecret" (long s) is the server's "secret" (encoding/json, as Go
// servers decode their arguments, folds it so, and so does
// strings.EqualFold), so it is redacted too; and a value redacted under
// one member and sent again under another ("token_confirm", as a
// sign-up form repeats a password, or a note) in the same call or a
// later one is not kept in the call entry either. Every byte the
// sidecar wrote is searched (searchWritten).
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
	} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lk__echo", Arguments: json.RawMessage(args), Meta: trace}); err != nil {
			t.Fatalf("lk__echo %s: %v", args, err)
		}
	}
	prompt := map[string]string{"token": confirmSecret, "again": confirmSecret}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "lk__greet", Arguments: prompt, Meta: trace}); err != nil {
		t.Fatalf("lk__greet: %v", err)
	}
	answers := provlogAnswers(t, cs, sp.base, token)
	stop()
	searchWritten(t, sp, rcv, data, answers, leakForms(foldSecret, confirmSecret))
}

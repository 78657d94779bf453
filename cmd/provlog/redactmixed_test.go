package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
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

// TestMixedCaseBase64WrittenNowhere: a client that sends, beside a
// redacted value, base64 of it with its letters' cases mixed (under a
// member the list does not name) to a downstream that echoes every
// argument everywhere (leakfx: results, stderr, notifications, blobs)
// does not get that base64 written: every byte the sidecar wrote (its
// data directory, Pebble's files, blobs, stderr, spans, export bundle,
// provlog__status) is searched for it in both alphabets.
func TestMixedCaseBase64WrittenNowhere(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	rcv := otlptest.Start(t)
	exe, _ := os.Executable()
	const token = "redact-mixed-token"
	sum := sha256.Sum256([]byte(token))
	data := filepath.Join(t.TempDir(), "data")
	cfg := fmt.Sprintf(`data: %s
origin: provlog.test/redactmixed
actors: [{id: alice, token_sha256: %s}]
log: {level: debug}
otel: {endpoint: %q}
servers:
  - id: lk
    command: [%q, "-test.run=^$"]
    env: {%s: "1"}
    redact: [token]
    retain: full
`, data, hex.EncodeToString(sum[:]), rcv.URL, exe, leakfxEnv)
	cfgPath := writeFile(t, filepath.Join(t.TempDir(), "provlog.yaml"), []byte(cfg))
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { sp.stop(t) })
	defer stop()
	waitTools(t, sp.base, token, []string{"lk__echo"})
	cs := connectHTTP(t, sp.base, token)
	const secret = "Mixed-Case-Secret-k7Qz"
	mixed := []string{"mIxEd-cAsE-sEcReT-K7qZ", "MiXeD-CaSe-SeCrEt-k7Qz"}
	forms := leakForms(secret)
	for i, m := range mixed {
		std, url := base64.StdEncoding.EncodeToString([]byte(m)), base64.RawURLEncoding.EncodeToString([]byte("\x00\x00"+m))
		forms[fmt.Sprintf("base64 of mixed case %d", i)], forms[fmt.Sprintf("base64url of mixed case %d", i)] = std, url
		args, _ := json.Marshal(map[string]string{"token": secret, "note": "as before: " + std + " / " + url})
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lk__echo", Arguments: json.RawMessage(args)}); err != nil {
			t.Fatalf("lk__echo %s: %v", args, err)
		}
	}
	answers := provlogAnswers(t, cs, sp.base, token)
	stop()
	searchWritten(t, sp, rcv, data, answers, forms)
}

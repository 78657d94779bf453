package proxy

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestStderrEndLogged: what a stdio server printed last on stderr is in
// the proxy's log once the proxy is closed, scrubbed: a line held for a
// line after it (it ends in a run of base64, and the server has a
// redacted value to find), when the proxy is closed while the server
// runs; a last line without a newline, base64 of a redacted value, when
// the server exits with it. The held line was logged half a second after
// it came, after the proxy's close, and the last line never.
func TestStderrEndLogged(t *testing.T) {
	const secret = "sk-Printed/18+Zx"
	held := "key: " + strings.Repeat("QUJD", 19)
	for _, tc := range []struct {
		name, text string
		exit       bool
		want       string
	}{
		{"held at close", held + "\n", false, held},
		{"unended at exit", "fatal: " + base64.StdEncoding.EncodeToString([]byte(secret)), true, "line=" + Redacted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf proctest.Buffer
			p := startProxy(t, newTestLog(t), []ServerConfig{leaksConfig(t, "lk")}, func(o *Options) { o.Logger = debugLogger(&buf) })
			cs := connectMemory(t, p, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lk__print", Arguments: map[string]any{"token": secret, "text": tc.text, "exit": tc.exit}})
			if !tc.exit && (err != nil || res.IsError) {
				t.Fatalf("print: %v %s", err, mustJSON(res))
			}
			p.Close()
			got := linesWith(&buf, "downstream stderr")
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("the server's last stderr %q is not in the proxy's log as %q: %q", tc.text, tc.want, got)
			}
			checkLogScrubbed(t, &buf, secret)
		})
	}
}

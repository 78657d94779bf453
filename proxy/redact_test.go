package proxy

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// lockedBuf is a log sink tests read back.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedactionHolds calls npm server-everything's echo with a redacted
// message and full retention, over the SDK path and the HTTP fast path: the
// client gets the echo as the server sent it, and the redacted value is
// nowhere on disk or in the proxy's log — not in the entries, not in the
// retained result blobs (kept scrubbed, under their own hash), not in the
// proxy's log lines (debug level, where a stdio server's stderr goes).
// Matching is case-insensitive when configured.
func TestRedactionHolds(t *testing.T) {
	l := newTestLog(t)
	var logs lockedBuf
	cfg := ServerConfig{ID: "ev", Command: everythingJS(t, "stdio"), Redact: []string{"message", "api_key"}, RedactIgnoreCase: true, Retain: RetainFull}
	p := startProxy(t, l, []ServerConfig{cfg}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	mem := connectMemory(t, p, nil)
	web := fastSession(t, p, connectHTTP(t, serveHTTP(t, p), "2025-11-25", nil))

	secrets := []string{"SECRET-sdk-path-1", "SECRET-fast-path-2", "KEY-in-any-case-3"}
	for i, cs := range []*mcp.ClientSession{mem, web} {
		before := l.size(t)
		args := map[string]any{"message": secrets[i], "API_Key": secrets[2]}
		var res *mcp.CallToolResult
		var err error
		want := uint64(0)
		if cs == web {
			want = 1
		}
		fastBefore := p.fastCalls.Load()
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: args})
		if got := p.fastCalls.Load() - fastBefore; got != want {
			t.Errorf("%d calls took the fast path, want %d", got, want)
		}
		if err != nil || res.IsError {
			t.Fatalf("echo: %v %s", err, mustJSON(res))
		}
		if !strings.Contains(textOf(res), secrets[i]) {
			t.Errorf("the client did not get the echo as the server sent it: %s", textOf(res))
		}
		e, b := l.callAt(t, before)
		if got := mustJSON(e.Fields["args"]); got != `{"API_Key":"[redacted]","message":"[redacted]"}` {
			t.Errorf("recorded args %s", got)
		}
		res2, _ := log.ParseCallResult(mustParse(t, l.entry(t, before+1)))
		blob := res2.RetainedBlob()
		if blob == "" || blob == res2.ResultSHA256 {
			t.Fatalf("retained blob %q, result %q: want a scrubbed copy under its own hash", blob, res2.ResultSHA256)
		}
		kept, err := l.blobs.Get(blob)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(kept, []byte("Echo: [redacted]")) {
			t.Errorf("retained result %s", kept)
		}
		if bytes.Contains(b, []byte("SECRET")) {
			t.Errorf("a redacted value reached the log: %s", b)
		}
	}

	// A value too short to cut out of a text withholds the texts that
	// hold it: the echo's string is kept as Withheld.
	before := l.size(t)
	res, err := web.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "Q7"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "Echo: Q7") {
		t.Fatalf("echo of a short value: %v %s", err, mustJSON(res))
	}
	res2, _ := log.ParseCallResult(mustParse(t, l.entry(t, before+1)))
	if kept, err := l.blobs.Get(res2.RetainedBlob()); err != nil || !bytes.Contains(kept, []byte(Withheld)) {
		t.Errorf("retained result of a short redacted value: %v %s", err, kept)
	}
	secrets = append(secrets, "Q7")

	// Nothing on disk or in the proxy's log holds a redacted value.
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the proxy's log holds %q", s)
		}
	}
	filepath.WalkDir(l.blobDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("blob %s holds %q", path, s)
			}
		}
		return nil
	})
	for i := uint64(0); i < l.size(t); i++ {
		for _, s := range secrets {
			if bytes.Contains(l.entry(t, i), []byte(s)) {
				t.Errorf("entry %d holds %q", i, s)
			}
		}
	}
}

func mustParse(t *testing.T, b []byte) *log.Entry {
	t.Helper()
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

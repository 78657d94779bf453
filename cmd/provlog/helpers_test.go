package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// Helpers the package's tests share: a sidecar opened in-process, this
// test binary run again as a child, a config or file written for a test,
// a directory viewed as provlog view serves it.

// quietLogger is a logger that drops everything.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mustOpenSidecar opens a sidecar on cfg as serve does (stdio front), with
// a quiet logger; the test closes it.
func mustOpenSidecar(t *testing.T, cfg *Config) *sidecar {
	t.Helper()
	sc, err := openSidecar(context.Background(), cfg, quietLogger(), true)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// mustKeygen makes the log's keys for origin in a new data dir data, as
// provlog keygen does, and loads them.
func mustKeygen(t testing.TB, data, origin string) *keys {
	t.Helper()
	if err := keygen(data, origin); err != nil {
		t.Fatal(err)
	}
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// callEntry returns the bytes of a call entry by the actor "local" of
// tool on server with args, made now.
func callEntry(server, tool string, args map[string]any) []byte {
	e := &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "local", Fields: map[string]any{"server": server, "tool": tool, "args": args}}
	b, err := e.Marshal()
	if err != nil {
		panic(err) // a test's entry is never too large
	}
	return b
}

// loadConfigText writes text as a config file at path and loads it.
func loadConfigText(t *testing.T, path, text string) *Config {
	t.Helper()
	writeFile(t, path, []byte(text))
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// writeFile writes b to path (0600) and returns path.
func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// childCmd is this test binary run again as a child: TestMain
// (crash_test.go) sends it to a child's code by one of the variables in
// env.
func childCmd(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// A child is a started child process.
type child struct {
	cmd    *exec.Cmd
	stdout io.Reader        // what lines has not read
	lines  *bufio.Scanner   // stdout, line by line (lines of up to 1 MiB)
	stderr *proctest.Buffer // all it wrote to stderr
}

// startChild starts cmd, reading its stdout and collecting its stderr.
func startChild(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdout: stdout, lines: bufio.NewScanner(stdout), stderr: &proctest.Buffer{}}
	c.lines.Buffer(make([]byte, 1<<20), 1<<20)
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// serveView serves dir (an export bundle or an evidence directory) as
// provlog view does until the test ends, and returns its URL.
func serveView(t *testing.T, ctx context.Context, dir string) string {
	t.Helper()
	v, err := openView(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	return serveViewOf(t, v)
}

// serveViewOf serves v as provlog view does until the test ends, and
// returns its URL.
func serveViewOf(t *testing.T, v *view) string {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.Config.Handler = v.handler(hs.Listener.Addr().String())
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL
}

// memClient connects an MCP client named name to sc's proxy in memory;
// closeClient ends the client's session and the proxy's.
func memClient(t *testing.T, sc *sidecar, name string) (cs *mcp.ClientSession, closeClient func()) {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := sc.proxy.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err = mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		t.Fatal(err)
	}
	return cs, func() { cs.Close(); ss.Close() }
}

// echoFixture is an MCP server over HTTP whose one tool, echo (read-only),
// answers with its q, so the same call gets the same result, kept as the
// same blob; it notes every q it gets.
type echoFixture struct {
	url string
	mu  sync.Mutex
	got []string
}

func newEchoFixture(t *testing.T) *echoFixture {
	t.Helper()
	fx := &echoFixture{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo-fixture", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		fx.mu.Lock()
		fx.got = append(fx.got, in.Q)
		fx.mu.Unlock()
		return text("echo: " + in.Q), nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	fx.url = ts.URL
	return fx
}

// sidecarEntry reads entry i of a running sidecar's log.
func sidecarEntry(t *testing.T, sc *sidecar, i uint64) *log.Entry {
	t.Helper()
	es, err := sc.store.Entries(context.Background(), i, i+1)
	if err != nil || len(es) != 1 {
		t.Fatalf("entry %d: %v", i, err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// retainingEcho is a config whose one server, fx, is a newEchoFixture kept
// with retain: full, and the config's data dir.
func retainingEcho(t *testing.T) (fx *echoFixture, data string, cfg *Config) {
	t.Helper()
	fx = newEchoFixture(t)
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	cfg = loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf("data: %s\nservers:\n  - id: fx\n    url: %s\n    retain: full\n", data, fx.url))
	return fx, data, cfg
}

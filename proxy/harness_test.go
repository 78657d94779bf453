package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/log/server"
)

// The tests run against real programs, installed by tools/mcptest/install.sh:
// PROVLOG_EVERYTHING_SERVER is go-sdk's conformance everything-server and
// PROVLOG_MCPTEST_DIR holds node_modules with @modelcontextprotocol's
// server-everything and TypeScript SDK, and client.mjs. Without them a test
// skips, except in CI (CI=true), where it fails.

func need(t *testing.T, what, path string) string {
	t.Helper()
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("%s not found (%q); run: eval \"$(bash tools/mcptest/install.sh)\"", what, path)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func goEverything(t *testing.T) string {
	return need(t, "PROVLOG_EVERYTHING_SERVER", os.Getenv("PROVLOG_EVERYTHING_SERVER"))
}

func mcptestDir(t *testing.T) string {
	return need(t, "PROVLOG_MCPTEST_DIR", os.Getenv("PROVLOG_MCPTEST_DIR"))
}

func nodeBin(t *testing.T) string {
	p, err := exec.LookPath("node")
	if err != nil {
		need(t, "node", "")
	}
	return p
}

// everythingJS returns the command running npm's server-everything.
func everythingJS(t *testing.T, mode string) []string {
	dir := mcptestDir(t)
	js := need(t, "server-everything", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
	return []string{nodeBin(t), js, mode}
}

// fixtureServer returns the command running this test binary as a
// downstream MCP server (see TestMain).
func fixtureServer(t testing.TB) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "-test.run=^$"}
}

// testLog is a real log: in-memory storage behind the real sequencer.
type testLog struct {
	store    *failingStore
	seq      *server.Sequencer
	verifier note.Verifier
	blobs    *blobs.Store
	blobDir  string
}

// failingStore is a log store whose commits can be made to fail.
type failingStore struct {
	*logtest.Memory
	fail atomic.Bool
}

func (s *failingStore) Commit(ctx context.Context, b *log.Batch) error {
	if s.fail.Load() {
		return errors.New("disk on fire (test)")
	}
	return s.Memory.Commit(ctx, b)
}

func newTestLog(t testing.TB) *testLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "provlog.test/proxy")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	store := &failingStore{Memory: logtest.NewMemory()}
	seq, err := server.OpenSequencer(context.Background(), store, signer, verifier, &server.SequencerOptions{
		CommitDelay: server.DefaultCommitDelay,
		Genesis:     func() ([]byte, error) { return log.Genesis(time.Now(), "provlog.test/proxy", vkey, nil, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })
	// After every scenario the log passes what 'provlog audit' checks: the
	// tree recomputed from the entries matches every checkpoint, every
	// entry parses, the stored nodes and leaf index agree, and every
	// call's definition is in a tools entry before it.
	t.Cleanup(func() {
		// Every call's announcement to the sequencer was used or withdrawn
		// (one left open would make every commit under load wait).
		if n := seq.Stats().Expected; n != 0 {
			t.Errorf("%d announced appends still open after the scenario", n)
		}
		rep, err := log.Audit(context.Background(), store.Memory, verifier, vkey)
		if err != nil {
			t.Errorf("audit after the scenario: %v", err)
		} else if len(rep.UnlistedTools) > 0 {
			// The proxy writes a server's tools entry before any call
			// naming one of its definitions.
			t.Errorf("audit after the scenario: calls %v name a tool_sha256 no earlier tools entry lists", rep.UnlistedTools)
		}
	})
	dir := t.TempDir()
	bs, err := blobs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{store: store, seq: seq, verifier: verifier, blobs: bs, blobDir: dir}
}

func (l *testLog) size(t testing.TB) uint64 {
	st, err := l.store.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Size
}

func (l *testLog) entry(t testing.TB, i uint64) []byte {
	t.Helper()
	es, err := l.store.Entries(context.Background(), i, i+1)
	if err != nil || len(es) != 1 {
		t.Fatalf("reading entry %d: %v", i, err)
	}
	return es[0]
}

// checkReceipt verifies a receipt against the log: it must prove a
// call.result entry. It returns that call, as callAt does.
func (l *testLog) checkReceipt(t *testing.T, text string) (*log.Entry, []byte) {
	t.Helper()
	if text == "" {
		t.Fatal("no receipt")
	}
	r, err := log.ParseReceipt([]byte(text))
	if err != nil {
		t.Fatalf("parsing receipt: %v\n%s", err, text)
	}
	b := l.entry(t, r.Index)
	if _, err := r.Verify(log.LeafHash(b), l.verifier); err != nil {
		t.Fatalf("receipt does not verify: %v", err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != log.KindCallResult {
		t.Fatalf("entry %d is a %q entry", r.Index, e.Kind)
	}
	res, err := log.ParseCallResult(e)
	if err != nil {
		t.Fatal(err)
	}
	if res.Call >= r.Index {
		t.Fatalf("call.result %d cites call %d, not an earlier entry", r.Index, res.Call)
	}
	return l.merge(t, res.Call, r.Index)
}

// callAt waits for the outcome of the call whose call entry is entry i,
// and returns the call as one entry: the call entry's fields and its
// call.result's (the "call" field among them), and the two entries' bytes
// one after the other.
func (l *testLog) callAt(t *testing.T, i uint64) (*log.Entry, []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for j := i + 1; ; j++ {
		l.waitSize(t, j+1)
		if time.Now().After(deadline) {
			t.Fatalf("no call.result for call %d", i)
		}
		e, err := log.ParseEntry(l.entry(t, j))
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != log.KindCallResult {
			continue
		}
		r, err := log.ParseCallResult(e)
		if err != nil {
			t.Fatal(err)
		}
		if r.Call == i {
			return l.merge(t, i, j)
		}
	}
}

func (l *testLog) merge(t *testing.T, call, result uint64) (*log.Entry, []byte) {
	t.Helper()
	cb, rb := l.entry(t, call), l.entry(t, result)
	ce, err := log.ParseEntry(cb)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Kind != log.KindCall {
		t.Fatalf("entry %d is a %q entry, not a call", call, ce.Kind)
	}
	if _, err := log.ParseCall(ce); err != nil {
		t.Fatal(err)
	}
	re, err := log.ParseEntry(rb)
	if err != nil {
		t.Fatal(err)
	}
	if re.Actor != ce.Actor {
		t.Errorf("call %d by %q, its result by %q", call, ce.Actor, re.Actor)
	}
	for k, v := range re.Fields {
		ce.Fields[k] = v
	}
	return ce, append(append(cb, '\n'), rb...)
}

func metaReceipt(m mcp.Meta) string {
	s, _ := m[ReceiptKey].(string)
	return s
}

// waitLogSize waits until the log holds n entries.
func (l *testLog) waitSize(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.size(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("log has %d entries, want %d", l.size(t), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(&tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tlogWriter struct{ t testing.TB }

func (w *tlogWriter) Write(p []byte) (int, error) {
	defer func() { recover() }() // a log line after the test ended
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// The log's parts the proxy takes through its own interfaces.
var (
	_ expecter  = (*server.Sequencer)(nil)
	_ BlobStore = (*blobs.Store)(nil)
)

// startProxy starts a proxy on l with the given servers.
func startProxy(t testing.TB, l *testLog, servers []ServerConfig, tweak func(*Options)) *Proxy {
	t.Helper()
	opts := Options{
		Servers:  servers,
		Log:      l.seq,
		Blobs:    l.blobs,
		Verifier: l.verifier,
		Actor: func(_ context.Context, req *mcp.CallToolRequest) (string, error) {
			if req.Extra != nil && req.Extra.TokenInfo != nil {
				return req.Extra.TokenInfo.UserID, nil
			}
			return "test-actor", nil
		},
		Logger: testLogger(t),
		Status: func(ctx context.Context) map[string]any {
			return map[string]any{"size": l.size(t)}
		},
		Prove: func(ctx context.Context, index int64, leafHash []byte) (*log.Receipt, error) {
			st, err := l.store.State(ctx)
			if err != nil {
				return nil, err
			}
			idx := uint64(index)
			if index < 0 {
				if idx, err = l.store.LeafIndex(ctx, leafHash); err != nil {
					return nil, err
				}
			}
			if idx >= st.Size {
				return nil, fmt.Errorf("index %d is not in a log of size %d", idx, st.Size)
			}
			proof, err := log.ProveInclusion(ctx, l.store, idx, st.Size)
			if err != nil {
				return nil, err
			}
			return &log.Receipt{Extra: log.LeafHash(l.entry(t, idx)), Index: idx, Proof: proof, Checkpoint: st.Checkpoint}, nil
		},
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// clientOptions returns options for a test client that records what the
// proxy sends it.
type clientLog struct {
	progress    chan *mcp.ProgressNotificationParams
	logs        chan *mcp.LoggingMessageParams
	toolChanges chan struct{}
	updated     chan string // the URIs of resources/updated
	// sample, if set, answers the server's sampling requests.
	sample func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)
}

func newClientLog() *clientLog {
	return &clientLog{
		progress:    make(chan *mcp.ProgressNotificationParams, 100),
		logs:        make(chan *mcp.LoggingMessageParams, 100),
		toolChanges: make(chan struct{}, 100),
		updated:     make(chan string, 100),
	}
}

// waitUpdated waits for the client's next resources/updated, which must
// be for uri; what names it in a failure.
func (c *clientLog) waitUpdated(t *testing.T, uri, what string) {
	t.Helper()
	select {
	case u := <-c.updated:
		if u != uri {
			t.Errorf("%s: resources/updated for %q, want %q", what, u, uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no resources/updated", what)
	}
}

func (c *clientLog) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.progress <- req.Params
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case c.logs <- req.Params:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case c.updated <- req.Params.URI:
			default:
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.toolChanges <- struct{}{}:
			default:
			}
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if c.sample != nil {
				return c.sample(ctx, req)
			}
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by the test client"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "tester", "email": "t@example.org"}}, nil
		},
	}
}

// connectMemory connects a Go client to the proxy in memory. The client's
// transport captures raw results, so tests can compare wire bytes.
func connectMemory(t *testing.T, p *Proxy, cl *clientLog) *mcp.ClientSession {
	t.Helper()
	if cl == nil {
		cl = newClientLog()
	}
	cp, sp := net.Pipe()
	ct := &mcp.IOTransport{Reader: cp, Writer: cp}
	ctx := context.Background()
	ss, err := p.connectPipe(ctx, sp, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "go-test-client", Version: "9.9.9"}, cl.options())
	cs, err := c.Connect(ctx, &captureTransport{inner: ct, asks: &askBudget{}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectInMemory connects c to p's front server at 2025-11-25 over
// in-memory transports, the SDK's server session itself.
func connectInMemory(t *testing.T, p *Proxy, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := p.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

const testToken, testActor = "s3cret-token", "alice"

// serveHTTP serves the proxy over HTTP with one valid token.
func serveHTTP(t testing.TB, p *Proxy) string {
	t.Helper()
	return serveTokens(t, p, map[string]string{testToken: testActor})
}

// serveTokens serves p's HTTP front, each of tokens' keys a bearer token
// of its value (an actor), and returns its /mcp URL.
func serveTokens(t testing.TB, p *Proxy, tokens map[string]string) string {
	srv := httptest.NewServer(p.HTTPHandler(staticTokens(func(tok string) (string, bool) {
		a, ok := tokens[tok]
		return a, ok
	})))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connectHTTP connects a Go client over streamable HTTP; version "" lets
// the SDK negotiate (2026-07-28, stateless).
func connectHTTP(t *testing.T, url, version string, cl *clientLog) *mcp.ClientSession {
	t.Helper()
	return connectHTTPAs(t, url, testToken, version, cl)
}

// connectHTTPAs is connectHTTP with the bearer token token.
func connectHTTPAs(t *testing.T, url, token, version string, cl *clientLog) *mcp.ClientSession {
	t.Helper()
	if cl == nil {
		cl = newClientLog()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "go-http-client", Version: "1.2.3"}, cl.options())
	// The transport captures raw results, so tests can compare wire bytes.
	rt := &captureRoundTripper{base: &bearer{token, http.DefaultTransport}, asks: &askBudget{}}
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(context.Background(), tr, opts)
	if err != nil {
		t.Fatalf("connecting over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// startEverythingHTTP runs npm's server-everything in streamable HTTP mode
// and returns its URL.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	args := everythingJS(t, "streamableHttp")
	port := proctest.FreePort(t)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proctest.WaitListening(t, addr, "server-everything", nil)
	return "http://" + addr + "/mcp"
}

// startGoEverythingHTTP runs go-sdk's conformance everything-server in
// streamable HTTP mode and returns its URL.
func startGoEverythingHTTP(t *testing.T) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	cmd := exec.Command(goEverything(t), "-http", addr, "-stateless=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	proctest.WaitListening(t, addr, "everything-server", nil)
	return "http://" + addr + "/mcp"
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func mustJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSpace(b.String())
}

// isCanonical reports whether b is in RFC 8785 canonical form.
func isCanonical(b []byte) bool {
	c, err := log.Canonicalize(b)
	return err == nil && bytes.Equal(c, b)
}

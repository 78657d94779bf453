package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transportFor returns the transport to server cfg, capturing results off
// the wire (capture.go): a stdio server's process (started on Connect,
// in its own process group, stderr to stderr) or a streamable HTTP
// client over base (http.DefaultTransport if nil) with the configured
// headers. listens are told of the subscriptions sent, the server's
// refusals of them, and the ends of those it left unanswered
// (pendingCalls); the server's requests draw on asks.
func transportFor(cfg ServerConfig, base http.RoundTripper, stderr io.Writer, listens listenHooks, asks *askBudget) (mcp.Transport, *process) {
	if len(cfg.Command) == 0 {
		if base == nil {
			base = http.DefaultTransport
		}
		rt := &captureRoundTripper{base: base, headers: cfg.Headers, asks: asks}
		rt.pending.listenHooks = listens
		// go-sdk takes a MaxEventSize of 0 for no bound, not its default.
		return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: &http.Client{Transport: rt}, MaxEventSize: maxEventBytes}, nil
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Dir = cfg.Dir
	if len(cfg.Env) > 0 {
		env := os.Environ()
		for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
			env = append(env, k+"="+cfg.Env[k])
		}
		cmd.Env = env
	}
	cmd.Stderr = stderr
	setProcessGroup(cmd)
	proc := &process{Cmd: cmd}
	return &captureTransport{inner: &commandTransport{cmd: proc, bound: cfg.timeout()}, listens: listens, cmd: proc, asks: asks}, proc
}

// A process is a stdio server's process as the proxy started it
// (startProcess), and what ends it and what it started (killProcessGroup).
type process struct {
	*exec.Cmd
	// keeper is, on Linux, the sidecar's end of the control pipe of the
	// process that keeps what the server starts (reaper_linux.go):
	// closing it ends them (killProcessGroup).
	keeper *os.File
}

// exitGrace is how long the connection to a stdio server outlives the
// server's process once it exited (exitWatch): what it wrote before it
// exited is read meanwhile.
const exitGrace = time.Second

// An exitWatch ends the connection to a stdio server when the process
// provlog started exits, even though its stdout has not ended: a child it
// left behind (sh -c 'sleep 300 & exec server') holds the pipe open, and
// the server's calls in flight would wait for their timeout. It ends it
// only if the process was still running when the server's first message
// (the initialize answer) was read: one that exited before then is a
// launcher that backgrounded the server on the stdio it handed on, and
// the connection lasts, as before, as long as that stdout does. Linux
// only (exited).
type exitWatch struct {
	pid int
	// gone is done exitGrace after the process exited, unless it was a
	// launcher.
	gone  context.Context
	spoke atomic.Bool // the first message was read
	mu    sync.Mutex
	// launcher says the process had exited when the first message was
	// read.
	launcher bool
	// The reader's context, and that context ended with gone too.
	parent, merged context.Context
	cancel         context.CancelFunc
	unwatch        func() bool
}

func watchExit(pid int) *exitWatch {
	gone, end := context.WithCancel(context.Background())
	w := &exitWatch{pid: pid, gone: gone}
	go func() {
		exited(pid, true)
		// Seen before the first message (which will find it exited) or
		// after it, under mu.
		w.mu.Lock()
		server := w.spoke.Load() && !w.launcher
		w.mu.Unlock()
		if server {
			time.AfterFunc(exitGrace, end)
		}
	}()
	return w
}

// read notes that a message was read.
func (w *exitWatch) read() {
	if w.spoke.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.launcher = exited(w.pid, false)
	w.spoke.Store(true)
}

// readCtx returns ctx, the one the session reads with, ended with gone
// too.
func (w *exitWatch) readCtx(ctx context.Context) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ctx != w.parent {
		if w.cancel != nil {
			w.unwatch()
			w.cancel()
		}
		w.parent = ctx
		w.merged, w.cancel = context.WithCancel(ctx)
		w.unwatch = context.AfterFunc(w.gone, w.cancel)
	}
	return w.merged
}

// A Conn is a client session to one downstream server, opened as the
// proxy opens its own (same transports, same protocol revisions), whose
// tool results are read off the wire. provlog replay uses it, so that it
// hashes fresh results exactly as the proxy hashed the recorded ones.
type Conn struct {
	cs  *mcp.ClientSession
	cmd *process
}

// Dial connects to server cfg as client name/version, in the revision the
// proxy speaks to it for a client of revision protocol (cfg.Revision): a
// server answers by the revision of the session a request comes on, so a
// call is re-run on the session it went to.
func Dial(ctx context.Context, cfg ServerConfig, protocol, name, version string, logger *slog.Logger) (*Conn, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, &mcp.ClientOptions{
		Logger:       logger,
		Capabilities: &mcp.ClientCapabilities{},
		// An input_required result (SEP-2322) is the call's result, as
		// the proxy, which leaves it to the client, records it.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	t, cmd := transportFor(cfg, nil, io.Discard, listenHooks{}, &askBudget{})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: cfg.Revision(protocol)})
	if err != nil {
		killProcessGroup(cmd)
		return nil, err
	}
	return &Conn{cs: cs, cmd: cmd}, nil
}

// A ListedTool is one item of a server's tools/list.
type ListedTool struct {
	Name string
	// SHA256 is the hash of its definition as the server listed it, made
	// as the proxy makes it: what a call entry made against it records as
	// tool_sha256 (DESIGN §2).
	SHA256 string
	// ReadOnly says it is annotated readOnlyHint.
	ReadOnly bool
}

// Tools lists the server's tools as the proxy lists them (catalogue.go):
// each item's bytes as the server sent them, not the SDK's encoding of
// its decoding, which drops the members its types lack and would not
// hash as the proxy's did. Items without a name are left out, as the
// proxy's tools entry leaves them out.
func (c *Conn) Tools(ctx context.Context) ([]ListedTool, error) {
	raws, err := toolKind().list(ctx, c.cs)
	if err != nil {
		return nil, err
	}
	tools := make([]ListedTool, 0, len(raws))
	for _, raw := range raws {
		name := nameOf(raw, "name")
		if name == "" {
			continue
		}
		t := ListedTool{Name: name, SHA256: definitionSum(raw)}
		if d, err := decodeTool(raw); err == nil && d.Annotations != nil {
			t.ReadOnly = d.Annotations.ReadOnlyHint
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// CallTool calls tool with args and returns its result's bytes exactly as
// the server sent them, made as the proxy makes a call through the SDK's
// client (sdkCall). A JSON-RPC error is an error.
func (c *Conn) CallTool(ctx context.Context, tool string, args any) (json.RawMessage, error) {
	var raw json.RawMessage
	if args != nil {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("the arguments of %s: %v", tool, err)
		}
	}
	o := sdkCall(ctx, c.cs, tool, &mcp.CallToolParamsRaw{Arguments: raw}, nil)
	switch {
	case o.wireErr != nil:
		return nil, o.wireErr
	case o.err != nil:
		return nil, o.err
	case o.remarshal:
		return nil, fmt.Errorf("the result of %s was not captured off the wire", tool)
	}
	return o.result, nil
}

// Close ends the session and stops a stdio server's process.
func (c *Conn) Close() error {
	err := c.cs.Close()
	killProcessGroup(c.cmd)
	return err
}

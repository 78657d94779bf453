package main

// One log per agent whatever the client: a stdio `serve` (Claude Desktop
// starts one) whose data dir is held by a running HTTP sidecar (Claude
// Code talks to that one) joins the sidecar's log. It forwards the stdio
// client's MCP messages over the sidecar's streamable HTTP endpoint as the
// config's stdio actor, with the token the sidecar made for that actor
// (<data>/local.token). When it cannot join, the MCP client gets a
// JSON-RPC error that says why and what to do, not a closed connection.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
)

// errDataDirHeld: another process holds the data dir's store.
var errDataDirHeld = errors.New("held by another running provlog")

// sidecarFile, in the data dir, says where the running HTTP sidecar serves
// and who its stdio actor is; it exists while the sidecar runs.
const sidecarFile = "sidecar.json"

type sidecarInfo struct {
	URL   string `json:"url"` // base URL, e.g. http://127.0.0.1:8080
	Actor string `json:"actor"`
	PID   int    `json:"pid"`
	// SessionIdle is how long the sidecar keeps an HTTP session without a
	// request (sessions.idle, as time.Duration's String); a joined serve
	// pings its session more often. Empty in files of older sidecars.
	SessionIdle string `json:"session_idle,omitempty"`
	// TokenSHA256 is the hash of the local.token the sidecar read at its
	// start or last reload, its stdio actor's: a joining serve acts with
	// the token in local.token, which must be that one (another actor's
	// would have it act as that actor). Empty in files of older sidecars.
	TokenSHA256 string `json:"token_sha256,omitempty"`
}

// joinSidecar finds the running sidecar on cfg's data dir and checks that
// this process can act in its log as cfg's stdio actor. It returns the
// bridge to run, or an error saying why not and what to do.
func joinSidecar(ctx context.Context, cfg *Config, logger *slog.Logger) (*bridge, error) {
	j, err := findSidecar(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	return &bridge{cfg: cfg, joined: j, hc: &http.Client{}}, nil
}

// joined is where a bridge relays to: the running sidecar's endpoint and
// the stdio actor's token, and how often to ping its sessions.
type joined struct {
	url, token string
	keepalive  time.Duration
	// bound is how long a message relayed may wait for the sidecar's
	// answer (joinBound; 0: that of a config without servers).
	bound time.Duration
}

// findSidecar finds the running sidecar on cfg's data dir and checks that
// this process can act in its log as cfg's stdio actor.
func findSidecar(ctx context.Context, cfg *Config, logger *slog.Logger) (joined, error) {
	info, err := awaitSidecar(ctx, cfg.Data, logger)
	if err != nil {
		return joined{}, err
	}
	if info.Actor != cfg.Actor {
		return joined{}, fmt.Errorf("the sidecar running on %s acts for stdio clients as %q, but this config's actor is %q; give both the same actor: (or use another data dir)",
			cfg.Data, info.Actor, cfg.Actor)
	}
	tok, err := os.ReadFile(filepath.Join(cfg.Data, localToken))
	if err != nil {
		return joined{}, fmt.Errorf("reading the stdio actor's token: %w", err)
	}
	if info.TokenSHA256 != "" && subtle.ConstantTimeCompare([]byte(hashLocalToken(tok)), []byte(strings.ToLower(info.TokenSHA256))) != 1 {
		return joined{}, fmt.Errorf("%s in %s is not the token the sidecar running there takes for its stdio actor %q, the one it read at its start or last reload (it was written over since, perhaps with another actor's token, which would have this process act as that actor); "+
			"restore it, or reload the sidecar (SIGHUP) or restart it so that it reads the file again, then start this one again", localToken, cfg.Data, info.Actor)
	}
	k, err := loadKeys(cfg.Data)
	if err != nil {
		return joined{}, err
	}
	// The sidecar at that URL must be this data dir's log.
	r := newRemote(info.URL, "")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cp, err := r.get(cctx, "/log/checkpoint")
	if err != nil {
		return joined{}, fmt.Errorf("data dir %s is held by a provlog that said it serves at %s, but it does not answer there (%v); stop it or wait for it to finish, then start this one again", cfg.Data, info.URL, err)
	}
	if _, _, err := log.OpenCheckpoint(cp, k.verifier); err != nil {
		return joined{}, fmt.Errorf("the sidecar at %s does not serve the log of %s (%v)", info.URL, cfg.Data, err)
	}
	idle, err := time.ParseDuration(info.SessionIdle)
	if err != nil || idle <= 0 {
		idle = proxy.DefaultSessionIdle
	}
	return joined{url: info.URL + "/mcp", token: strings.TrimSpace(string(tok)), keepalive: idle / 3, bound: joinBound(cfg)}, nil
}

// joinWait is how long a stdio serve that finds its data dir held waits
// for the holder to say where it serves (sidecarFile). An HTTP sidecar
// says so only once it serves, after its store is open and its servers
// connected; a stdio serve started meanwhile (Claude Desktop at login,
// beside the sidecar) told its client, at once and for good, that the
// holder serves no HTTP API (TestStdioJoinsStartingSidecar).
const joinWait = 15 * time.Second

// awaitSidecar returns what the running sidecar on data says of itself,
// waiting up to joinWait while none says anything.
func awaitSidecar(ctx context.Context, data string, logger *slog.Logger) (sidecarInfo, error) {
	deadline := time.Now().Add(joinWait)
	for said := false; ; said = true {
		info, running, err := readSidecar(data)
		if running || err != nil {
			return info, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return info, fmt.Errorf("data dir %s is held by another provlog that serves no HTTP API (none said where it serves in %s), so this one cannot join its log. "+
				"Run the shared sidecar with --http (provlog serve --config F --http 127.0.0.1:8080), then start this one again", data, joinWait)
		}
		if !said {
			logger.Info("the data dir is held by a provlog that has not said where it serves (an HTTP sidecar still starting?): waiting for it", "data", data, "wait", joinWait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readSidecar reads what the sidecar on data says of itself, and reports
// whether a running one said it.
func readSidecar(data string) (info sidecarInfo, running bool, err error) {
	b, err := os.ReadFile(filepath.Join(data, sidecarFile))
	if errors.Is(err, os.ErrNotExist) {
		return info, false, nil
	}
	if err != nil {
		return info, false, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.URL == "" {
		return info, false, fmt.Errorf("%s is not what a running sidecar writes; remove it if no provlog runs on %s", filepath.Join(data, sidecarFile), data)
	}
	// A file left behind by a sidecar that was killed says nothing.
	return info, info.PID <= 0 || syscall.Kill(info.PID, 0) != syscall.ESRCH, nil
}

// bridge relays newline-delimited JSON-RPC between a stdio MCP client
// and a streamable HTTP MCP endpoint.
type bridge struct {
	cfg *Config
	hc  *http.Client

	mu sync.Mutex
	// joined is where it relays (its keepalive: how often the bridge
	// pings its session: the sidecar closes a session after
	// sessions.idle without a request, and a stdio client need not make
	// any while it is connected). A rejoin changes it (joinagain.go).
	joined
	session string
	version string
	again   rejoining
	outMu   sync.Mutex
	out     io.Writer
	logger  *slog.Logger
	// pausedOnce logs the first time reading requests waits (take).
	pausedOnce sync.Once
	// writeFailed logs the first write to the client that failed.
	writeFailed sync.Once
	flight      flight
}

// message is what the bridge needs to know of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// run relays until in ends (the client went away) or ctx is done.
func (b *bridge) run(ctx context.Context, in io.Reader, out io.Writer, logger *slog.Logger) error {
	b.out, b.logger = out, logger
	// The GET stream ends with the client, and so do requests under way
	// (cutText).
	lctx, stopListen := context.WithCancel(ctx)
	defer stopListen()
	rctx, cutRequests := context.WithCancel(ctx)
	defer cutRequests()
	var wg, listening sync.WaitGroup
	r := bufio.NewReaderSize(in, 1<<16)
	b.flight.cond.L = &b.flight.mu
	for {
		line, n, err := readLine(r)
		if msg := bytes.TrimSpace(line); line == nil && n > 0 {
			b.write(proxy.LongLineRefusal(n, logger))
		} else if len(msg) > 0 && b.refuse(msg) {
			// Answered here as the stdio front answers it: the sidecar's
			// 400 would reach no one, as it names no request.
		} else if len(msg) > 0 {
			var m message
			json.Unmarshal(line, &m)
			switch {
			case m.Method == "initialize":
				// Everything after it needs the session it makes.
				b.remember(line)
				b.post(ctx, line, m)
				if b.streamVersion() {
					listening.Go(func() { b.listen(lctx) })
					listening.Go(func() { b.keepAlive(lctx) })
				}
			case m.Method != "" && len(m.ID) > 0:
				// A request may take long (a tool call): the next
				// message must not wait for it, unless maxJoinedRequests
				// are under way.
				if !b.take() {
					b.fail(m, fmt.Sprintf("provlog: %d requests of this client are under way, and the sidecar waits for its answers to requests it sent it (sampling, elicitation); this request was not relayed: send it again once those are answered", maxJoinedRequests))
					break
				}
				wg.Go(func() {
					defer b.release()
					b.post(rctx, line, m)
				})
			default:
				b.post(ctx, line, m) // notifications and responses, in order
				if m.Method == "" {
					b.settle(m.ID)
				}
			}
		}
		if err != nil {
			break
		}
	}
	cutRequests()
	wg.Wait()
	b.endSession() // which ends the calls at the sidecar
	stopListen()
	listening.Wait()
	return nil
}

// refuse answers msg, a line from the client, and reports whether it did,
// if it is no JSON-RPC message (proxy.Refusal).
func (b *bridge) refuse(msg []byte) bool {
	b.mu.Lock()
	rev := b.version
	b.mu.Unlock()
	a := proxy.Refusal(msg, rev, b.logger)
	if a == nil {
		return false
	}
	b.write(a)
	return true
}

// write writes msg, whole lines, to the client. A failed write is said
// once, as the stdio front says it, and the bridge goes on: its client's
// calls are still made and recorded (TestJoinedStdioClientClosesStdout).
func (b *bridge) write(msg []byte) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if _, err := b.out.Write(msg); err != nil {
		b.writeFailed.Do(func() {
			b.logger.Warn("joined: writing to the stdio client failed; its answers are lost from here on, its calls still recorded", "error", err)
		})
	}
}

// readLine reads the next line of r, with its line end. A line longer
// than a message may be (proxy.MaxLineBytes) is read to its end but not
// held: line is nil, and n its length. A joined serve held a line of any
// length.
func readLine(r *bufio.Reader) (line []byte, n int, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		n += len(frag)
		if n <= proxy.MaxLineBytes {
			line = append(line, frag...)
		} else {
			line = nil
		}
		if err != bufio.ErrBufferFull {
			return line, n, err
		}
	}
}

// streamVersion says whether the negotiated protocol has the standalone
// GET stream for server-initiated messages (before 2026-07-28).
func (b *bridge) streamVersion() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.version != "" && b.version < "2026-07-28"
}

func (b *bridge) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, method, b.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.session != "" {
		req.Header.Set("Mcp-Session-Id", b.session)
	}
	if b.version != "" {
		req.Header.Set("Mcp-Protocol-Version", b.version)
	}
	return req, nil
}

// post sends one message and relays what comes back. A request that gets
// no answer gets a JSON-RPC error saying why.
func (b *bridge) post(ctx context.Context, line []byte, m message) {
	b.mu.Lock()
	bound := b.bound
	b.mu.Unlock()
	if bound <= 0 {
		bound = joinBound(&Config{})
	}
	ctx, cancel := context.WithTimeoutCause(ctx, bound, errSidecarSilent)
	defer cancel()
	resp, err := b.send(ctx, bytes.TrimSpace(line), m)
	if err != nil {
		why := cutText
		switch {
		case errors.Is(context.Cause(ctx), errSidecarSilent):
			why = silentText(bound)
		case ctx.Err() == nil:
			why = "the provlog sidecar this process joined does not answer: " + err.Error() + "; restart this MCP server once the sidecar runs again"
		}
		b.fail(m, why)
		return
	}
	defer resp.Body.Close()
	if m.Method == "initialize" {
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			b.mu.Lock()
			b.session = s
			b.mu.Unlock()
		}
	}
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		return
	case resp.StatusCode == http.StatusNotFound && m.Method != "initialize":
		b.fail(m, "the provlog sidecar this process joined no longer knows this session (it restarted, or this process was stopped for longer than its sessions.idle), and joining it again failed (see the log); restart this MCP server")
		return
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		b.fail(m, fmt.Sprintf("the provlog sidecar this process joined answered %s: %s", resp.Status, strings.TrimSpace(string(body))))
		return
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b.relaySSE(ctx, resp.Body, m)
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.fail(m, "reading the sidecar's answer: "+err.Error())
		return
	}
	b.emit(body, m)
}

// relayed is what the bridge reads of a message from the sidecar, in the
// decode that also checks that it is JSON.
type relayed struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
}

// emit writes msg, one message from the sidecar, which emit may change,
// to the client on a line of its own; an initialize result also sets the
// protocol version of later requests. It reports what it read of msg,
// and false if msg is not JSON, which is dropped. A message is decoded
// once: it used to be compacted too, to drop line ends that an event's
// data spread over lines holds, which only such a message needs
// (BenchmarkJoinedRelay).
func (b *bridge) emit(msg []byte, m message) (relayed, bool) {
	var v relayed
	if err := json.Unmarshal(msg, &v); err != nil {
		b.logger.Warn("dropped a message from the sidecar that is not JSON", "err", err)
		return v, false
	}
	if m.Method == "initialize" {
		var r struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &r) == nil && r.Result.ProtocolVersion != "" {
			b.mu.Lock()
			b.version = r.Result.ProtocolVersion
			b.mu.Unlock()
		}
	}
	if bytes.ContainsAny(msg, "\r\n") {
		var c bytes.Buffer
		json.Compact(&c, msg)
		msg = c.Bytes()
	}
	b.write(append(msg, '\n'))
	return v, true
}

// cutText answers a request under way when the client's stdin closes.
// The bridge cuts it off, as the stdio front cuts its own calls then (it
// stops, answering them "cut off: provlog was stopping"): a client that
// closes stdin is quitting (MCP's stdio shutdown: close stdin, wait for
// the server to exit, then signal it), it can no longer answer the
// server's requests nor cancel, and waiting for its calls kept the bridge
// until the sidecar's timeout for a call that waited for its answer
// (TestJoinedStdinClosedMidCall). The sidecar records each such call as
// cancelled by the client, which is what happened.
const cutText = "cut off: provlog was stopping, as its client closed its stdin; the sidecar records the call as cancelled by the client"

// relaySSE relays the data of each server-sent event of a request made
// with ctx.
func (b *bridge) relaySSE(ctx context.Context, body io.Reader, m message) {
	r := bufio.NewReaderSize(body, 1<<16)
	var data []byte
	answered := false
	var asked []json.RawMessage // the sidecar's requests relayed on it
	defer func() { b.settle(asked...) }()
	relay := func() {
		if len(data) > 0 {
			v, ok := b.emit(data, m)
			answered = answered || ok && v.Method == nil && sameID(v.ID, m.ID)
			if ok && v.Method != nil && len(v.ID) > 0 {
				asked = append(asked, v.ID)
				b.owe(v.ID)
			}
		}
		data = data[:0] // emit wrote it, and keeps none of it
	}
	for {
		line, err := r.ReadBytes('\n')
		l := bytes.TrimRight(line, "\r\n")
		switch {
		case len(l) == 0 && len(line) > 0:
			relay()
		case bytes.HasPrefix(l, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(l, []byte("data:")), []byte(" "))...)
		}
		if err != nil {
			relay()
			// The stream of the server's own messages (listen) answers
			// nothing: its end is no request's, and it is opened again.
			if !answered && len(m.ID) > 0 {
				// The stream ended without the answer: the sidecar
				// stopped (or was killed) during the request, whose
				// client would otherwise wait for it without end.
				why := "the provlog sidecar this process joined ended the request's stream without its answer"
				if !errors.Is(err, io.EOF) {
					why += " (" + err.Error() + ")"
				}
				why += "; a call it recorded shows in the log as made, with or without its result; restart this MCP server once the sidecar runs again"
				switch {
				case errors.Is(context.Cause(ctx), errSidecarSilent):
					b.mu.Lock()
					why = silentText(b.bound)
					b.mu.Unlock()
				case ctx.Err() != nil:
					why = cutText
				}
				b.fail(m, why)
			}
			return
		}
	}
}

// sameID reports whether a and b, JSON-RPC ids, are one id; an empty one
// is none.
func sameID(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// listen keeps the standalone GET stream open for server-initiated
// messages (list changes, sampling), reopening it until ctx is done.
func (b *bridge) listen(ctx context.Context) {
	for delay := 100 * time.Millisecond; ctx.Err() == nil; delay = min(2*delay, 10*time.Second) {
		gen := b.generation()
		req, err := b.request(ctx, http.MethodGet, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := b.hc.Do(req)
		switch {
		case err != nil:
			if refused(err) {
				b.rejoin(ctx, gen) // the sidecar restarted elsewhere, or is down
			}
		case resp.StatusCode == http.StatusMethodNotAllowed:
			resp.Body.Close()
			return
		case resp.StatusCode == http.StatusNotFound:
			// The sidecar restarted: join it again, or wait on.
			resp.Body.Close()
			if b.rejoin(ctx, gen) == nil {
				delay = 100 * time.Millisecond
			}
		default:
			if resp.StatusCode == http.StatusOK {
				b.relaySSE(ctx, resp.Body, message{})
				delay = 100 * time.Millisecond
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// keepAlive pings the session every b.keepalive until ctx is done, so
// that the sidecar does not close it as idle while the client is
// connected (the go-sdk's server asks clients to ping to keep a session;
// the bridge's GET stream does not count). The answers are not the
// client's: its ids are its own, and the bridge's ping id is none of
// them on this connection.
func (b *bridge) keepAlive(ctx context.Context) {
	b.mu.Lock()
	every := b.keepalive
	b.mu.Unlock()
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"provlog-join-keepalive-%d","method":"ping"}`, n)
		req, err := b.request(ctx, http.MethodPost, []byte(body))
		if err != nil {
			return
		}
		resp, err := b.hc.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		// A session that is gone (404) is made again by the stream's
		// rejoin or the client's next request; the pings go on.

	}
}

// endSession tells the sidecar the client went away.
func (b *bridge) endSession() {
	b.mu.Lock()
	s := b.session
	b.mu.Unlock()
	if s == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if req, err := b.request(ctx, http.MethodDelete, nil); err == nil {
		if resp, err := b.hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// fail answers a request with a JSON-RPC error (notifications and
// responses have nobody to tell; the reason goes to stderr).
func (b *bridge) fail(m message, why string) {
	b.logger.Error("relaying to the sidecar", "method", m.Method, "err", why)
	if len(m.ID) == 0 || m.Method == "" {
		return
	}
	b.write(rpcError(m.ID, why))
}

// rpcError is a JSON-RPC internal error answering id, on a line.
func rpcError(id json.RawMessage, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": msg}})
	return append(b, '\n')
}

// serveStdioAnyway is stdio serve when this process cannot open the
// sidecar itself (err): it joins the running sidecar that holds the data
// dir, or answers the client with the reason. It returns when the client
// goes away or ctx is done.
func serveStdioAnyway(ctx context.Context, cfg *Config, err error, in io.Reader, out io.Writer, logger *slog.Logger) error {
	done := make(chan error, 1)
	if errors.Is(err, errDataDirHeld) {
		br, jerr := joinSidecar(ctx, cfg, logger)
		if jerr == nil {
			logger.Info("the data dir is held by a running sidecar: joining its log", "data", cfg.Data, "sidecar", br.url, "actor", cfg.Actor)
			go func() { done <- br.run(ctx, in, out, logger) }()
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
				return nil
			}
		}
		err = jerr
	}
	logger.Error("provlog cannot serve; answering the MCP client with the reason", "err", err)
	go func() { done <- answerWithError(in, out, err) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return err
	}
}

// answerWithError serves a stdio MCP client that provlog cannot serve:
// every request gets a JSON-RPC error carrying why, so the client shows
// the reason instead of "connection closed". It returns err when the
// client goes away.
func answerWithError(in io.Reader, out io.Writer, err error) error {
	msg := "provlog cannot serve: " + err.Error()
	r := bufio.NewReaderSize(in, 1<<16)
	for {
		line, _, rerr := readLine(r)
		var m message
		if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 {
			out.Write(rpcError(m.ID, msg))
		}
		if rerr != nil {
			return err
		}
	}
}

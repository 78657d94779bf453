package main

// A joined serve outlives its sidecar's restarts. When the sidecar it
// relays to restarts (on its address or another, after a crash, an
// upgrade or a config change), the session the bridge had is gone: the
// new sidecar answers 404 for it, or nothing answers where the old one
// served. The bridge then finds the sidecar again as it first did (the
// data dir's sidecar.json, the same log and actor), makes a new session
// with the client's own initialize, and sends the message again: a
// sidecar that did not know the session, or was not reached, did nothing
// with it, so nothing is made or recorded twice. A request under way when
// the sidecar stopped is not sent again (the sidecar may have forwarded
// and recorded it); its client is told, as before.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// rejoining is what a bridge keeps to join its sidecar again; its
// members but one are guarded by the bridge's mu.
type rejoining struct {
	one  sync.Mutex // held by the one rejoin under way
	gen  uint64     // how many times the bridge joined again
	init []byte     // the client's initialize, as it sent it
}

// remember keeps line, the client's initialize, for rejoins.
func (b *bridge) remember(line []byte) {
	b.mu.Lock()
	b.again.init = bytes.Clone(bytes.TrimSpace(line))
	b.mu.Unlock()
}

// generation is the count of rejoins so far: a message sent in one
// generation whose session was gone asks for the next one.
func (b *bridge) generation() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.again.gen
}

// refused reports whether err is a connection nothing accepted: the
// message was not sent.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// send posts body, the client's message m, and returns the sidecar's
// answer. A request or notification whose session was gone, or that
// nothing accepted, is sent once more after a rejoin; a response (to a
// request of the gone session) and an initialize are not.
func (b *bridge) send(ctx context.Context, body []byte, m message) (*http.Response, error) {
	for again := m.Method != "" && m.Method != "initialize"; ; again = false {
		gen := b.generation()
		req, err := b.request(ctx, http.MethodPost, body)
		if err != nil {
			return nil, err
		}
		resp, err := b.hc.Do(req)
		lost := err == nil && resp.StatusCode == http.StatusNotFound || err != nil && refused(err)
		if !again || !lost || ctx.Err() != nil {
			return resp, err
		}
		if err == nil {
			resp.Body.Close()
		}
		if b.rejoin(ctx, gen) != nil {
			return resp, err // closed: the caller reads only its status
		}
	}
}

// rejoin joins the sidecar again, unless a rejoin since generation gen
// did. It says on stderr what it did, or why it could not.
func (b *bridge) rejoin(ctx context.Context, gen uint64) error {
	b.again.one.Lock()
	defer b.again.one.Unlock()
	b.mu.Lock()
	init, cur, version := b.again.init, b.again.gen, b.version
	b.mu.Unlock()
	if cur != gen {
		return nil
	}
	if b.cfg == nil {
		return errors.New("the bridge does not know its data dir")
	}
	j, err := findSidecar(ctx, b.cfg, b.logger)
	if err == nil {
		err = b.initialize(ctx, j, init, version)
	}
	if err != nil {
		b.logger.Warn("joined: the sidecar's session is gone (it restarted or stopped), and joining it again failed", "err", err)
		return err
	}
	b.logger.Info("joined: the sidecar's session was gone (it restarted); joined it again", "sidecar", j.url)
	return nil
}

// initialize makes a session with the sidecar j by the client's initialize
// (init) and its notifications/initialized, and relays to it from here
// on. A client of a revision without sessions (2026-07-28), or that never
// initialized, is relayed to j as it is. The answer is the bridge's, not
// the client's, which had its own; it must agree on the client's
// protocol version.
func (b *bridge) initialize(ctx context.Context, j joined, init []byte, version string) error {
	if init == nil || version >= "2026-07-28" {
		b.mu.Lock()
		b.joined, b.again.gen = j, b.again.gen+1
		b.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	post := func(body []byte, session string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+j.token)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		return b.hc.Do(req)
	}
	resp, err := post(init, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the client's initialize was answered %s", resp.Status)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	got, err := initializeAnswer(resp)
	if err != nil {
		return err
	}
	if got != version {
		return fmt.Errorf("the sidecar now agrees on protocol version %q, where this client agreed on %q", got, version)
	}
	note, err := post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), session)
	if err != nil {
		return err
	}
	note.Body.Close()
	if note.StatusCode != http.StatusAccepted && note.StatusCode != http.StatusNoContent && note.StatusCode != http.StatusOK {
		return fmt.Errorf("notifications/initialized was answered %s", note.Status)
	}
	b.mu.Lock()
	b.joined, b.session, b.again.gen = j, session, b.again.gen+1
	b.mu.Unlock()
	return nil
}

// initializeAnswer reads the protocol version of an initialize's answer,
// sent as JSON or as a server-sent event.
func initializeAnswer(resp *http.Response) (string, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("reading the answer to the client's initialize: %w", err)
	}
	msgs := [][]byte{body}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msgs = nil
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				msgs = append(msgs, bytes.Clone(bytes.TrimSpace(d)))
			}
		}
	}
	for _, msg := range msgs {
		var r struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(msg, &r) != nil {
			continue
		}
		if r.Error != nil {
			return "", fmt.Errorf("the client's initialize was refused: %s", r.Error.Message)
		}
		if r.Result.ProtocolVersion != "" {
			return r.Result.ProtocolVersion, nil
		}
	}
	return "", errors.New("the answer to the client's initialize holds no protocol version")
}

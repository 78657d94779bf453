// Package browser drives a real headless Chromium for tests, over the
// Chrome DevTools Protocol on a pipe (--remote-debugging-pipe: the browser
// reads requests on its fd 3 and writes answers and events on its fd 4,
// each a JSON message ended by a NUL byte), so no driver program and no
// WebSocket library are needed.
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// flags are the options Chromium runs with: headless, as root without a
// sandbox, and without the background connections a closed network refuses.
func flags() []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--remote-debugging-pipe", "--window-size=1200,900",
	}
}

// A Browser is a running Chromium.
type Browser struct {
	cmd     *exec.Cmd
	toB     *os.File // the browser's fd 3
	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	done    chan struct{}
	readErr error
}

type message struct {
	ID     int64           `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start runs the Chromium at path with a fresh profile in profileDir.
func Start(path, profileDir string) (*Browser, error) {
	r3, w3, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r4, w4, err := os.Pipe()
	if err != nil {
		r3.Close()
		w3.Close()
		return nil, err
	}
	cmd := exec.Command(path, append(flags(), "--user-data-dir="+profileDir, "about:blank")...)
	cmd.ExtraFiles = []*os.File{r3, w4}
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{r3, w3, r4, w4} {
			f.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	r3.Close()
	w4.Close()
	b := &Browser{cmd: cmd, toB: w3, pending: map[int64]chan message{}, done: make(chan struct{})}
	go b.read(r4)
	return b, nil
}

func (b *Browser) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			b.mu.Unlock()
			close(b.done)
			return
		}
		var m message
		if json.Unmarshal(line[:len(line)-1], &m) != nil || m.ID == 0 {
			continue // events are not needed: pages are polled
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends one command (to a page's session when session is not empty)
// and decodes its result into out.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan message, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	req := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		req["sessionId"] = session
	}
	msg, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := b.toB.Write(append(msg, 0)); err != nil {
		return fmt.Errorf("%s: writing to the browser: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: the browser went away: %v", method, b.readErr)
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Close ends the browser and waits for it.
func (b *Browser) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.call(ctx, "", "Browser.close", map[string]any{}, nil)
	b.toB.Close()
	select {
	case <-b.done:
	case <-ctx.Done():
		b.cmd.Process.Kill()
	}
	return b.cmd.Wait()
}

// A Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab at about:blank.
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &s); err != nil {
		return nil, err
	}
	return &Page{b: b, session: s.SessionID}, nil
}

// Navigate loads url in the page.
func (p *Page) Navigate(ctx context.Context, url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigating to %s: %s", url, r.ErrorText)
	}
	return nil
}

// BeforeScripts runs script in every document the page loads from now
// on, before the document's own scripts (tests inject faults with it).
func (p *Page) BeforeScripts(ctx context.Context, script string) error {
	// Chromium runs such scripts only in a page whose Page domain is on.
	if err := p.b.call(ctx, p.session, "Page.enable", map[string]any{}, nil); err != nil {
		return err
	}
	return p.b.call(ctx, p.session, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": script}, nil)
}

// Eval evaluates a JavaScript expression (awaiting it if it is a promise)
// and decodes its value into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", params, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluating %q: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// WaitString polls expr every 5 ms until it gives a non-empty string,
// and returns it.
func (p *Page) WaitString(ctx context.Context, expr string) (string, error) {
	for {
		var s string
		if err := p.Eval(ctx, "String(("+expr+") ?? '')", &s); err != nil {
			return "", err
		}
		if s != "" {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %s: %w", expr, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Screenshot returns a PNG of the whole page, beyond the window's height.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var m struct {
		Content struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := p.b.call(ctx, p.session, "Page.getLayoutMetrics", map[string]any{}, &m); err != nil {
		return nil, err
	}
	var r struct {
		Data string `json:"data"`
	}
	clip := map[string]any{"x": 0, "y": 0, "width": m.Content.Width, "height": m.Content.Height, "scale": 1}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true, "clip": clip}, &r); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil || len(png) == 0 {
		return nil, errors.New("the browser sent no screenshot")
	}
	return png, nil
}

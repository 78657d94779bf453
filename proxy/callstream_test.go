package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// A streamServer is go-sdk's streamable HTTP server with an event store,
// so that it can close its own stream of a call and be resumed too. Its
// tools: gate answers once release is sent to, poll closes its stream of
// the call (SSE polling) and then answers, echo answers at once, big
// answers with bigText.
type streamServer struct {
	url           string
	release       chan struct{}
	closedStreams atomic.Int32
}

// bigText is the text of the big tool's result.
var bigText = strings.Repeat("b", 5<<17)

func newStreamServer(t *testing.T) *streamServer {
	ss := &streamServer{release: make(chan struct{}, 1)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "polling", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	srv.AddTool(&mcp.Tool{Name: "gate", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ss.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return text("opened"), nil
	})
	srv.AddTool(&mcp.Tool{Name: "poll", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
			ss.closedStreams.Add(1)
		}
		return text("polled"), nil
	})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("echoed"), nil
	})
	srv.AddTool(&mcp.Tool{Name: "big", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(bigText), nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(down.Close)
	ss.url = down.URL
	return ss
}

// TestCallStreamResumes: a fast-path call of a 2025-11-25 client is an
// event stream that can be resumed (SEP-1699), whose downstream is a
// streamServer. In every case the call is recorded once, its response
// arrives after its call.result entry, with a receipt that verifies, and
// a stream delivered can be resumed again, from memory.
func TestCallStreamResumes(t *testing.T) {
	down := newStreamServer(t)
	release := down.release
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: down.url}}, nil)
	front := serveHTTP(t, p)
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))

	// checkOnce checks that the call whose entry is at index at has its
	// call.result right after it, not an error, and nothing else after.
	checkOnce := func(t *testing.T, at uint64, resp string) {
		t.Helper()
		var msg struct {
			Result struct {
				Meta    mcp.Meta          `json:"_meta"`
				IsError bool              `json:"isError"`
				Content []json.RawMessage `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(resp), &msg); err != nil || msg.Result.IsError || len(msg.Result.Content) == 0 {
			t.Fatalf("response %s: %v", resp, err)
		}
		e, _ := l.checkReceipt(t, metaReceipt(msg.Result.Meta))
		if e.Fields["is_error"] != false {
			t.Errorf("call entry %v", e.Fields)
		}
		if got := l.size(t); got != at+2 {
			t.Errorf("the log grew by %d entries, want the call and its result", got-at)
		}
	}

	t.Run("DroppedBeforeTheResult", func(t *testing.T) {
		at := l.size(t)
		body, first := postCall(t, front, cs.ID(), "gate")
		if first["id"] == "" || first["retry"] == "" || first["data"] != "" {
			t.Fatalf("first event %q, want a priming event (an id, a retry field, no data)", first)
		}
		body.Close() // the connection drops while the call waits
		l.waitSize(t, at+1)
		if e, err := log.ParseEntry(l.entry(t, at)); err != nil || e.Kind != log.KindCall || l.size(t) != at+1 {
			t.Fatalf("before the result: entry %d is %v (%v), log size %d", at, e, err, l.size(t))
		}
		resumed := getResume(t, front, cs.ID(), first["id"], http.StatusOK)
		release <- struct{}{}
		ev := resumed.next(t)
		if ev["id"] == "" || ev["id"] == first["id"] {
			t.Errorf("the response's event id is %q after %q", ev["id"], first["id"])
		}
		checkOnce(t, at, ev["data"])
		if ev := resumed.next(t); ev != nil {
			t.Errorf("after the response: %q", ev)
		}
		resumed.Close()
		// Delivered, it is kept a while: resuming again replays the same
		// response, from memory.
		again := getResume(t, front, cs.ID(), first["id"], http.StatusOK)
		if ev2 := again.next(t); ev2["id"] != ev["id"] || ev2["data"] != ev["data"] {
			t.Errorf("resumed again: %q, want %q", ev2, ev)
		}
		if ev := again.next(t); ev != nil {
			t.Errorf("after the response, resumed again: %q", ev)
		}
		again.Close()
		if got := l.size(t); got != at+2 {
			t.Errorf("resuming again wrote %d entries", got-at-2)
		}
	})

	t.Run("ResultWhileAway", func(t *testing.T) {
		at := l.size(t)
		body, first := postCall(t, front, cs.ID(), "gate")
		body.Close()
		// The result may come before the proxy saw the client go or
		// after it: either way the response is kept.
		release <- struct{}{}
		l.waitSize(t, at+2)
		resumed := getResume(t, front, cs.ID(), first["id"], http.StatusOK)
		checkOnce(t, at, resumed.next(t)["data"])
		if ev := resumed.next(t); ev != nil {
			t.Errorf("after the response: %q", ev)
		}
		resumed.Close()
		if got := keptAs(p, cs.ID(), first["id"]); got != "delivered" {
			t.Errorf("after the response was read, the stream is %s, want delivered", got)
		}
	})

	t.Run("LostAtDelivery", func(t *testing.T) {
		// The race of a connection closing as the response is written,
		// caused: the client stops reading after the priming event and
		// closes only once the proxy wrote the response into the socket.
		// The proxy saw a write succeed, as it does when the client's
		// side is already closing, and the client never read it.
		at := l.size(t)
		body, first := postCall(t, front, cs.ID(), "gate")
		s := streamOf(t, p, cs.ID(), first["id"])
		release <- struct{}{}
		waitFor(t, "the response to be written", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.done && s.w == nil
		})
		body.Close()
		resumed := getResume(t, front, cs.ID(), first["id"], http.StatusOK)
		ev := resumed.next(t)
		checkOnce(t, at, ev["data"])
		if !strings.Contains(ev["data"], "opened") {
			t.Errorf("resumed response %s", ev["data"])
		}
		if ev := resumed.next(t); ev != nil {
			t.Errorf("after the response: %q", ev)
		}
		resumed.Close()
	})

	t.Run("ServerPolls", func(t *testing.T) {
		at := l.size(t)
		body, first := postCall(t, front, cs.ID(), "poll")
		// The server closed its stream of the call: the proxy closes the
		// client's the same way, with the server's retry, and no response.
		ev := body.next(t)
		if ev["retry"] != "10" || ev["data"] != "" {
			t.Errorf("after priming: %q, want the server's retry (10) and no data", ev)
		}
		if ev := body.next(t); ev != nil {
			t.Errorf("the stream goes on after the retry: %q", ev)
		}
		body.Close()
		resumed := getResume(t, front, cs.ID(), first["id"], http.StatusOK)
		ev = resumed.next(t)
		checkOnce(t, at, ev["data"])
		if !strings.Contains(ev["data"], "polled") {
			t.Errorf("resumed response %s", ev["data"])
		}
		resumed.Close()
		if down.closedStreams.Load() == 0 {
			t.Error("the server never closed a stream")
		}
	})

	t.Run("NotAStreamOfTheSession", func(t *testing.T) {
		other := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		body, first := postCall(t, front, cs.ID(), "gate")
		defer body.Close()
		// Another session cannot resume it, nor can a made-up event.
		getResume(t, front, other.ID(), first["id"], http.StatusBadRequest).Close()
		getResume(t, front, cs.ID(), first["id"]+"9", http.StatusBadRequest).Close()
		release <- struct{}{}
		if ev := body.next(t); !strings.Contains(ev["data"], "opened") {
			t.Errorf("response %q", ev)
		}
	})
}

// TestKeptStreamsBounded: finished streams kept for a resume are dropped
// beyond keptStreamBytes, delivered ones first, each kind oldest first,
// and delivered ones also beyond deliveredStreamBytes, oldest first; they
// leave their session, and the session's end drops the rest. Undelivered
// streams are a third of keptStreamBytes each, delivered ones a third of
// deliveredStreamBytes. TestKeptStreamsDeliveredFirst is the delivered
// bound over HTTP.
func TestKeptStreamsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		kept string // the streams kept in turn: d delivered, u undelivered
		want string // which are kept after: k kept, _ dropped
	}{
		{"Undelivered", "uuuuu", "__kkk"},
		{"Delivered", "ddddd", "__kkk"},
		{"DeliveredFirst", "uuddu", "kk__k"},
		{"DeliveredOwnBound", "udddd", "k_kkk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Proxy{}
			fs := &frontSession{}
			var all []*callStream
			for i, kind := range tc.kept {
				size := keptStreamBytes / 3
				if kind == 'd' {
					size = deliveredStreamBytes / 3
				}
				s := &callStream{fs: fs, id: "provlog" + string(rune('a'+i)), events: [][]byte{[]byte("x")}, size: size - keptStreamOverhead}
				fs.streams.Store(s.id, s)
				s.mu.Lock()
				p.keep(s, kind == 'd')
				s.mu.Unlock()
				all = append(all, s)
			}
			if p.kept.bytes > keptStreamBytes || p.kept.dbytes > deliveredStreamBytes {
				t.Errorf("%d bytes kept, %d of them delivered, over %d or %d", p.kept.bytes, p.kept.dbytes, keptStreamBytes, deliveredStreamBytes)
			}
			got := ""
			for _, s := range all {
				if _, in := fs.streams.Load(s.id); in {
					got += "k"
				} else {
					got += "_"
				}
			}
			if got != tc.want {
				t.Errorf("kept %s, want %s", got, tc.want)
			}
			p.closeStreams(fs)
			if n := p.kept.waiting.Len() + p.kept.delivered.Len(); p.kept.bytes != 0 || p.kept.dbytes != 0 || n != 0 {
				t.Errorf("after the session: %d bytes in %d streams", p.kept.bytes, n)
			}
		})
	}
}

// streamOf returns the resumable stream of session sid whose first event
// is first.
func streamOf(t *testing.T, p *Proxy, sid, first string) *callStream {
	t.Helper()
	v, ok := p.sessions.Load(sid)
	if !ok {
		t.Fatalf("no session %s", sid)
	}
	id, _, _ := strings.Cut(first, "_")
	sv, ok := v.(*frontSession).streams.Load(id)
	if !ok {
		t.Fatalf("no stream %s in session %s", id, sid)
	}
	return sv.(*callStream)
}

// keptAs says how the proxy keeps the stream of session sid whose first
// event is first: "waiting" (its response undelivered), "delivered", "in
// progress" (its call is), or "gone".
func keptAs(p *Proxy, sid, first string) string {
	v, ok := p.sessions.Load(sid)
	if !ok {
		return "gone"
	}
	id, _, _ := strings.Cut(first, "_")
	sv, ok := v.(*frontSession).streams.Load(id)
	if !ok {
		return "gone"
	}
	s := sv.(*callStream)
	s.mu.Lock()
	defer s.mu.Unlock()
	p.kept.mu.Lock()
	defer p.kept.mu.Unlock()
	switch {
	case s.dropped:
		return "gone"
	case !s.done:
		return "in progress"
	case s.kept == nil:
		return "done but not kept"
	case s.at.IsZero():
		return "waiting"
	}
	return "delivered"
}

func keptBytes(p *Proxy) int {
	p.kept.mu.Lock()
	defer p.kept.mu.Unlock()
	return p.kept.bytes
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// postCall POSTs a tools/call of tool on session sid and returns the
// answer's event stream with its first event read.
func postCall(t *testing.T, front, sid, tool string) (*sseStream, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, front, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ev__`+tool+`","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("HTTP %d %s: %s", resp.StatusCode, ct, b)
	}
	st := &sseStream{bufio.NewReader(resp.Body), resp.Body}
	return st, st.next(t)
}

// getResume GETs the events after lastID on session sid, expecting status
// want.
func getResume(t *testing.T, front, sid, lastID string, want int) *sseStream {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, front, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastID)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("resuming after %q: HTTP %d %s, want %d", lastID, resp.StatusCode, b, want)
	}
	return &sseStream{bufio.NewReader(resp.Body), resp.Body}
}

// An sseStream is an event stream as a client reads it.
type sseStream struct {
	br   *bufio.Reader
	body io.ReadCloser
}

func (s *sseStream) Close() { s.body.Close() }

// next reads the next event's fields (data lines joined by "\n"), or
// returns nil at the stream's end.
func (s *sseStream) next(t *testing.T) map[string]string {
	t.Helper()
	ev := map[string]string{}
	for {
		line, err := s.br.ReadString('\n')
		if errors.Is(err, io.EOF) && line == "" {
			if len(ev) > 0 {
				return ev
			}
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if len(ev) > 0 {
				return ev
			}
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		if k == "data" && ev["data"] != "" {
			v = ev["data"] + "\n" + v
		}
		ev[k] = v
	}
}

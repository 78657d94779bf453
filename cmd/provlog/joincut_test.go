package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestJoinedCallCutBySidecar: a stdio serve joined to a sidecar relays a
// tool call whose answer comes on an SSE stream; the sidecar dies (kill -9)
// before it answers, so the stream ends without the answer. The client must
// be told (bridge.post's contract: "a request that gets no answer gets a
// JSON-RPC error saying why"). Before, relaySSE returned at the stream's
// end without a word, and the client waited for an answer that never came
// (seen with real processes: a joined client's call hung until it gave
// up).
func TestJoinedCallCutBySidecar(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops, as when the sidecar is killed
	}))
	defer srv.Close()
	out := &proctest.Buffer{} // what the bridge writes to its client
	b := &bridge{joined: joined{url: srv.URL + "/mcp", token: "t"}, hc: &http.Client{}, out: out, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__append","arguments":{"text":"a"}}}` + "\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.post(t.Context(), line, message{ID: json.RawMessage("7"), Method: "tools/call"})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("post did not return after the sidecar's stream ended")
	}
	var got struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace([]byte(out.String())), &got); err != nil || string(got.ID) != "7" || got.Error == nil {
		t.Fatalf("the client got %q for its call cut off by the sidecar's death, want a JSON-RPC error answering id 7", out.String())
	}
	t.Logf("client told: %s", got.Error.Message)
}

package proxy

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPReadAnswerBounded: a streamable HTTP server that answers a
// resources/read or a prompts/get with a JSON body of 40 MiB (a valid
// result: one text of that size) gets the read failed once it sent more
// than maxEventBytes, saying so, with nothing recorded, and the client's
// session goes on, as a tools/call's answer is bounded
// (TestHTTPDownstreamEndlessAnswer). The proxy read all 40 MiB (about
// ten times that in memory), recorded the read and passed the result on
// as one message over 16 MiB, which go-sdk's stdio client refuses,
// ending its session.
func TestHTTPReadAnswerBounded(t *testing.T) {
	testHTTPReadAnswerBounded(t, "application/json")
}

// TestHTTPReadEventBounded: as TestHTTPReadAnswerBounded, the answer one
// event of an event stream. go-sdk's client takes a MaxEventSize of 0
// for no bound at all (its doc says the default, 16 MiB), so the 40 MiB
// event was read, recorded and passed on likewise.
func TestHTTPReadEventBounded(t *testing.T) {
	testHTTPReadAnswerBounded(t, "text/event-stream")
}

func testHTTPReadAnswerBounded(t *testing.T, mediaType string) {
	const total = 40 << 20
	l := newTestLog(t)
	var written atomic.Int64
	p := readOddProxy(t, l, "2025-11-25", func(w http.ResponseWriter, r *http.Request, method string) {
		member := `"contents":[{"uri":"res://x","text":"`
		if method == "prompts/get" {
			member = `"messages":[{"role":"user","content":{"type":"text","text":"`
		}
		w.Header().Set("Content-Type", mediaType)
		head, tail := "", ""
		if mediaType == "text/event-stream" {
			head, tail = "id: e1\ndata: ", "\n\n"
		}
		w.Write([]byte(head + `{"jsonrpc":"2.0","id":` + callRequestID(t, r) + `,"result":{` + member))
		written.Store(0)
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for written.Load() < total {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		if method == "prompts/get" {
			w.Write([]byte(`"}}]}}` + tail))
		} else {
			w.Write([]byte(`"}]}}` + tail))
		}
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	for _, method := range []string{"resources/read", "prompts/get"} {
		size := l.size(t)
		var err error
		if method == "prompts/get" {
			_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "m__x"})
		} else {
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "m+res://x"})
		}
		if err == nil || !strings.Contains(err.Error(), "over 16 MiB") {
			t.Errorf("%s answered with %d MiB: %v, want the read failed past 16 MiB, saying so", method, total>>20, err)
		}
		if n := l.size(t) - size; n != 0 {
			t.Errorf("%s answered with %d MiB: %d entries written, want none", method, total>>20, n)
		}
		if n := written.Load(); n >= total {
			t.Errorf("%s: the server wrote all %d bytes of its answer: the proxy read them all", method, n)
		}
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("the client's session after the reads: %v", err)
	}
}

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// pipeTranscript sends lines to a fresh session of p's pipe front, each
// after the answer to the one before (a notification has none), and says
// what came back: each answer's ids and whether each was a result, or
// that the session ended, with the reason the server gave.
func pipeTranscript(t *testing.T, p *Proxy, lines []string) []string {
	t.Helper()
	cp, sp := net.Pipe()
	defer cp.Close()
	ss, err := p.connectPipe(context.Background(), sp, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	in := bufio.NewReader(cp)
	var got []string
	for _, line := range lines {
		cp.SetDeadline(time.Now().Add(time.Minute)) // for a hung front, not a bound
		if _, err := cp.Write([]byte(line + "\n")); err != nil {
			got = append(got, "ended on write")
			break
		}
		if strings.Contains(line, `"method":"notifications/`) {
			continue
		}
		b, err := in.ReadBytes('\n')
		if err != nil {
			werr := ss.Wait()
			got = append(got, fmt.Sprintf("ended: %v", werr))
			break
		}
		got = append(got, answerShape(t, b))
	}
	return got
}

// answerShape is "id:result" or "id:error <code>" for each message of an
// answer, in brackets for a batch's.
func answerShape(t *testing.T, b []byte) string {
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	one := func(m msg) string {
		if m.Error != nil {
			return fmt.Sprintf("%s:error %d", m.ID, m.Error.Code)
		}
		return string(m.ID) + ":result"
	}
	var batch []msg
	if json.Unmarshal(b, &batch) == nil {
		var parts []string
		for _, m := range batch {
			parts = append(parts, one(m))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return one(m)
}

// TestPipeBatchTracing: over the pipe front (stdio's), a JSON-RPC batch
// gets the same answer with tracing off and on: refused on a 2025-06-18+
// session (answered -32600, and the session goes on), served on a 2025-03-26
// one, where each call of the batch is recorded and, with tracing, its
// span carries its own request id.
func TestPipeBatchTracing(t *testing.T) {
	down := metaEchoServer(t)
	batch := `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"down__meta","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"down__meta","arguments":{"x":1}}},` +
		`{"jsonrpc":"2.0","id":4,"method":"ping"}]`
	session := func(rev string) []string {
		return []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + rev + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			batch,
			`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
		}
	}
	want := map[string][]string{
		"2025-11-25": {"1:result", "null:error -32600", "5:result"},
		"2025-06-18": {"1:result", "null:error -32600", "5:result"},
		"2025-03-26": {"1:result", `[2:result "three":result 4:result]`, "5:result"},
	}
	for _, tracing := range []bool{false, true} {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		l := newTestLog(t)
		p := startProxy(t, l, []ServerConfig{{ID: "down", URL: down}}, func(o *Options) {
			if tracing {
				o.Tracer = tp.Tracer("provlog")
			}
		})
		for _, rev := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
			before := l.size(t)
			got := pipeTranscript(t, p, session(rev))
			if strings.Join(got, "\n") != strings.Join(want[rev], "\n") {
				t.Errorf("tracing %v, %s: got\n\t%s\nwant\n\t%s", tracing, rev, strings.Join(got, "\n\t"), strings.Join(want[rev], "\n\t"))
			}
			grew := l.size(t) - before
			if served := rev == "2025-03-26"; (served && grew != 4) || (!served && grew != 0) {
				t.Errorf("tracing %v, %s: the log grew by %d", tracing, rev, grew)
			}
		}
		if !tracing {
			continue
		}
		var ids []string
		for _, s := range sr.Ended() {
			if s.Name() == "tools/call down__meta" {
				ids = append(ids, attrMap(s.Attributes())["jsonrpc.request.id"])
			}
		}
		if strings.Join(sortedCopy(ids), " ") != "2 three" {
			t.Errorf("the batch's spans have request ids %q, want 2 and three", ids)
		}
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// FuzzFrameTap: for any bytes, the tap notes the shape of each JSON value
// a decoder reads from them, up to the first one the SDK's connection
// cannot take (not JSON, or neither an object nor an array), after which
// the connection has ended.
func FuzzFrameTap(f *testing.F) {
	for _, s := range []string{
		`{"a":1}` + "\n" + `[{"id":1},{"id":2}]` + "\n",
		`[ {"s":"],[\"}"} , [1,[2,3]], "x", 4 ,true]`,
		`[]`, `{}{}`, `123`, `"str"`, `}`, `[{"a":}]`, " \r\n\t[null]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []frame
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil || len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
				break
			}
			fr := frame{raw[0] == '[', 1}
			if fr.batch {
				var elems []json.RawMessage
				if json.Unmarshal(raw, &elems) != nil {
					t.Fatalf("%q decoded, but not as an array", raw)
				}
				fr.n = len(elems)
			}
			want = append(want, fr)
		}
		tap := &frameTap{r: io.NopCloser(bytes.NewReader(b))}
		if _, err := io.Copy(io.Discard, tap); err != nil {
			t.Fatal(err)
		}
		if len(tap.frames) < len(want) || !slices.Equal(tap.frames[:len(want)], want) {
			t.Fatalf("%q: tap noted %v, want %v first", b, tap.frames, want)
		}
	})
}

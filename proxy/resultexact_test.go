package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// bigNumberServer is a go-sdk server over streamable HTTP (JSON responses)
// whose tool "echo" answers {"n": "<digits>"} with structured content
// {"id": <digits>}, the number written out as sent (a json.RawMessage,
// which encoding/json passes on as it is), and a text that echoes the
// argument "password".
func bigNumberServer(t *testing.T) (url string, wire *wireResults) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ N, Password string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(`{"id":` + args.N + `}`),
				Content: []mcp.Content{&mcp.TextContent{Text: "the id" + args.Password}}}, nil
		})
	return serveWire(t, srv)
}

// TestResultNumbersKept: a result holding an integer no double equals
// (12345678901234567891, whose JCS form is 12345678901234567000) is
// hashed as received, its call.result saying so (result_canonical:
// false), so two results apart only in that number have two hashes, and
// a retained one is kept with every digit. Before, both were named by the
// hash of one JCS form: the log could not tell them apart. A number a
// double holds is hashed in JCS form, as before.
func TestResultNumbersKept(t *testing.T) {
	url, wire := bigNumberServer(t)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "big", URL: url}, {ID: "full", URL: url, Retain: RetainFull, Redact: []string{"password"}}}, nil)
	cs := connectMemory(t, p, nil)
	sums := map[string]string{}
	for _, c := range []struct {
		tool, n, password string
		raw               bool
	}{
		{"big__echo", "12345678901234567891", "", true},
		{"big__echo", "12345678901234567890", "", true},
		{"big__echo", "1e-400", "", true},
		{"big__echo", "9007199254740992", "", false},
		{"full__echo", "12345678901234567891", "", true},
		{"full__echo", "12345678901234567891", " hunter22", true},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"n": c.n, "password": c.password}})
		if err != nil || res.IsError {
			t.Fatalf("%s %s: %v %v", c.tool, c.n, err, res)
		}
		cr := receiptCallResult(t, l, res)
		got := wire.get("tools/call")
		canon, err := log.Canonicalize(got)
		if err != nil {
			t.Fatalf("%s: the server's result %s is not I-JSON (%v): the test needs it to be", c.n, got, err)
		}
		want := hexSHA256(canon)
		if c.raw {
			want = hexSHA256(got)
		}
		if cr.ResultRaw != c.raw || cr.ResultSHA256 != want || cr.ResultBytes != int64(len(got)) {
			t.Errorf("%s %s: call.result has ResultRaw %v, %s of %d bytes; want ResultRaw %v, %s of %d bytes (the result: %s)",
				c.tool, c.n, cr.ResultRaw, cr.ResultSHA256, cr.ResultBytes, c.raw, want, len(got), got)
		}
		if cr.ResultRetained {
			// Kept as received, or, when it echoed a redacted value,
			// scrubbed: with every digit either way.
			b, err := p.opts.Blobs.Get(cr.RetainedBlob())
			var kept struct {
				StructuredContent struct{ ID json.Number }
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err != nil || dec.Decode(&kept) != nil || kept.StructuredContent.ID.String() != c.n ||
				(c.password == "") != bytes.Equal(b, got) || bytes.Contains(b, []byte("hunter22")) {
				t.Errorf("%s %s%s: the kept result %s (%v), want the bytes received, %s, scrubbed of the password if it holds it", c.tool, c.n, c.password, b, err, got)
			}
		}
		if c.tool == "big__echo" {
			sums[c.n] = cr.ResultSHA256
		}
	}
	if a, b := sums["12345678901234567891"], sums["12345678901234567890"]; a == b {
		t.Errorf("results {\"id\":12345678901234567891} and {\"id\":12345678901234567890} have one result_sha256, %s", a)
	}
}

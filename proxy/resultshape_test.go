package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResultNotPassedOnRecordedAsFailed: a server that answers a call
// with a result the client cannot be given (null, an array, none at all,
// an object whose _meta is not an object) gets the call failed, and its
// call.result says so (is_error, the error the client got), over stdio
// and HTTP. The call.result said the call succeeded (is_error false, with
// a receipt the client never got) while the client was told it failed.
func TestResultNotPassedOnRecordedAsFailed(t *testing.T) {
	check := func(t *testing.T, l *testLog, before uint64, err error, want string) {
		t.Helper()
		var we *jsonrpc.Error
		if !errors.As(err, &we) || !strings.Contains(we.Message, want) {
			t.Fatalf("the client got %v, want an error saying %q", err, want)
		}
		e, _ := l.callAt(t, before)
		if e.Fields["is_error"] != true || !strings.Contains(e.Fields["error"].(string), want) {
			t.Errorf("the call.result of a call whose client got %q: %v", we.Message, e.Fields)
		}
		if !strings.Contains(string(we.Data), ReceiptKey) {
			t.Errorf("the client's error carries no receipt: %s", we.Data)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		l := newTestLog(t)
		p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
		cs := connectMemory(t, p, nil)
		before := l.size(t)
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__null", Arguments: map[string]any{}})
		check(t, l, before, err, "the tools/call result is not a JSON object")
		// go-sdk's "EOF" for an answer with no result was told, and
		// recorded, as a server that closed the connection.
		before = l.size(t)
		_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__none", Arguments: map[string]any{}})
		check(t, l, before, err, `server "raw": its answer holds neither a result nor an error`)
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__ok", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Errorf("a call after them: %v", err)
		}
	})
	for name, tc := range map[string]struct{ member, want string }{
		"HTTP null":         {`"result":null`, "the tools/call result is not a JSON object"},
		"HTTP array":        {`"result":[1,2]`, "the tools/call result is not a JSON object"},
		"HTTP no result":    {``, "the tools/call result is not a JSON object"},
		"HTTP _meta array":  {`"result":{"_meta":[1],"content":[]}`, "the result's _meta is not an object"},
		"HTTP content link": {`"result":{"content":{"type":"resource_link","uri":"x"}}`, "the result's content is not an array of objects"},
	} {
		t.Run(name, func(t *testing.T) {
			l := newTestLog(t)
			before := l.size(t)
			_, err := callOddDownstreamOn(t, l, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(`data: {"jsonrpc":"2.0","id":` + callRequestID(t, r) + sep(tc.member) + tc.member + "}\n\n"))
			})
			// The log's first entries are its genesis and the tools entry.
			check(t, l, before+1, err, tc.want)
		})
	}
}

func sep(member string) string {
	if member == "" {
		return ""
	}
	return ","
}

// TestResultPassedOnAsSent: a result reaches the client as the server
// sent it, its receipt spliced in, at its front or at the front of its
// own _meta: escapes (go-sdk's servers write "<" as \u003c), a content
// block's _meta and the server's spacing are kept. Such a result was
// decoded and encoded again, twice (once to see that it could be passed
// on, once to pass it on): its members sorted, its spacing gone, "<" and
// ">" written as escapes where the server wrote them plainly.
func TestResultPassedOnAsSent(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	front := serveHTTP(t, p)
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
	for tool, want := range map[string][2]string{
		"escaped": {`{"_meta":{"` + ReceiptKey + `":"`, `"},` + rawResults["escaped"][1:]},
		"metaown": {`{"content":[{"type":"text","text":"\u003cb\u003e"}], "_meta" : {"` + ReceiptKey + `":"`, `", "k":1 } }`},
	} {
		before := l.size(t)
		resp, body := postMCP(t, front, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raw__`+tool+`","arguments":{}}}`, map[string]string{
			"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25",
		})
		msg := body // a JSON answer, or the event stream's message
		for line := range strings.Lines(body) {
			if m, ok := strings.CutPrefix(line, "data: {"); ok {
				msg = "{" + strings.TrimRight(m, "\n")
			}
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(msg, `{"jsonrpc":"2.0","id":7,"result":`+want[0]) || !strings.HasSuffix(msg, want[1]+`}`) {
			t.Errorf("%s: the client got HTTP %d: %s\nwant the server's result %s with the receipt spliced in", tool, resp.StatusCode, body, rawResults[tool])
		}
		e, _ := l.callAt(t, before)
		canon, err := log.Canonicalize([]byte(rawResults[tool]))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(canon); e.Fields["result_sha256"] != hex.EncodeToString(sum[:]) || e.Fields["is_error"] != false {
			t.Errorf("%s: call.result %v, want the server's result's hash %x", tool, e.Fields, sum)
		}
	}
}

// TestReadPassedOnAsSent: a resources/read or prompts/get result reaches
// the client as the server sent it, its receipt spliced in at the front
// of its own _meta (go-sdk's front compacts it): its members in the
// server's order and "<" as the server wrote it. Each read was decoded
// and encoded again to add the receipt: its members sorted, "<", ">" and
// "&" written as \u003c, \u003e and \u0026. Only a result with a URI to
// give its front form is still encoded again, to the same value.
func TestReadPassedOnAsSent(t *testing.T) {
	asis := rawReadResults["asis"]
	for _, prefix := range []string{"", "default"} {
		l := newTestLog(t)
		cfg := rawServerConfig(t, "raw")
		uri, prompt := "raw+raw://asis", "raw__asis"
		if prefix == "" {
			cfg.Prefix, uri, prompt = &prefix, "raw://asis", "asis"
		}
		p := startProxy(t, l, []ServerConfig{cfg}, nil)
		front := serveHTTP(t, p)
		cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		for _, tc := range []struct{ kind, params, sent, frontURI string }{
			{log.KindResourceRead, `"method":"resources/read","params":{"uri":"` + uri + `"}`, asis.resource, uri},
			{log.KindPromptGet, `"method":"prompts/get","params":{"name":"` + prompt + `"}`, asis.prompt, ""},
		} {
			before := l.size(t)
			resp, body := postMCP(t, front, `{"jsonrpc":"2.0","id":7,`+tc.params+`}`, map[string]string{
				"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25",
			})
			msg := body // a JSON answer, or the event stream's message
			for line := range strings.Lines(body) {
				if m, ok := strings.CutPrefix(line, "data: {"); ok {
					msg = "{" + strings.TrimRight(m, "\n")
				}
			}
			var answer struct{ Result json.RawMessage }
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(msg), &answer) != nil {
				t.Fatalf("prefix %q: the %s got HTTP %d: %s", prefix, tc.kind, resp.StatusCode, body)
			}
			// The same value: the server's, with the receipt in its _meta
			// and the resource's front URI.
			var got, want map[string]any
			json.Unmarshal(answer.Result, &got)
			json.Unmarshal([]byte(tc.sent), &want)
			meta, _ := got["_meta"].(map[string]any)
			receipt, _ := meta[ReceiptKey].(string)
			delete(meta, ReceiptKey)
			if tc.frontURI != "" {
				want["contents"].([]any)[0].(map[string]any)["uri"] = tc.frontURI
			}
			if receipt == "" || !reflect.DeepEqual(got, want) {
				t.Errorf("prefix %q: the %s got %s, want the server's %s with a receipt", prefix, tc.kind, answer.Result, tc.sent)
			}
			// As sent, but for a URI to rewrite: the receipt at the
			// front of the result's own _meta.
			at := strings.Index(tc.sent, `"_meta":{`) + len(`"_meta":{`)
			quoted, _ := json.Marshal(receipt)
			asSent := tc.sent[:at] + `"` + ReceiptKey + `":` + string(quoted) + `,` + tc.sent[at:]
			if tc.frontURI != "raw+raw://asis" && string(answer.Result) != asSent {
				t.Errorf("prefix %q: the %s got\n%s\nwant the server's result as sent, with its receipt:\n%s", prefix, tc.kind, answer.Result, asSent)
			}
			e, err := log.ParseRead(mustParse(t, l.entry(t, before)))
			canon, _ := log.Canonicalize([]byte(tc.sent))
			if sum := sha256.Sum256(canon); err != nil || e.ResultSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("prefix %q: the %s entry %+v (%v), want the server's result's hash %x", prefix, tc.kind, e, err, sum)
			}
		}
	}
}

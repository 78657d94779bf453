package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// readRaw makes a resources/read of front URI uri, or a prompts/get of
// front prompt name (uri ""), through the pipe front (pc: a client of an
// older revision) or as a 2026-07-28 client of the HTTP front at url
// (pc nil), and returns the JSON-RPC answer and the entries written.
func readRaw(t *testing.T, l *testLog, pc *pipeClient, url, uri, name string) (answer []byte, wrote [][]byte) {
	t.Helper()
	method, params, mname := "prompts/get", `{"name":"`+name+`"`, name
	if uri != "" {
		method, params, mname = "resources/read", `{"uri":"`+uri+`"`, uri
	}
	n := l.size(t)
	if pc != nil {
		pc.send(`{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":` + params + `}}`)
		answer = pc.read()
	} else {
		_, b := postMCP(t, url, `{"jsonrpc":"2.0","id":9,"method":"`+method+`","params":`+params+statelessMeta+`}}`,
			map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Protocol-Version": statelessProtocol, "Mcp-Method": method, "Mcp-Name": mname})
		for line := range strings.Lines(b) {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				answer = []byte(strings.TrimSpace(data))
			}
		}
	}
	for i := n; i < l.size(t); i++ {
		wrote = append(wrote, l.entry(t, i))
	}
	return answer, wrote
}

// checkReadAsReceived checks that a read whose result (want, as the
// server sent it) holds what go-sdk's types do not was passed on as
// received, holding text, with its receipt, and that its one entry,
// of kind, hashes it as received (result_canonical false).
func checkReadAsReceived(t *testing.T, l *testLog, what, kind string, answer []byte, wrote [][]byte, want, text string) {
	t.Helper()
	var got struct {
		Result struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
	}
	json.Unmarshal(answer, &got) // 1e999 is no float64: the rest is read
	if !bytes.Contains(answer, []byte(text)) || bytes.Contains(answer, []byte(`"error"`)) || got.Result.Meta[ReceiptKey] == nil || len(wrote) != 1 {
		t.Errorf("%s: the client got %.300s and %d entries were written, want the result as sent with its receipt and one entry", what, answer, len(wrote))
		return
	}
	var receipt string
	json.Unmarshal(got.Result.Meta[ReceiptKey], &receipt)
	e := l.readReceipt(t, mcp.Meta{ReceiptKey: receipt}, kind)
	if e.ResultSHA256 != hexSHA256([]byte(want)) || !e.ResultRaw || e.ResultRemarshalled {
		t.Errorf("%s: the %s entry %+v, want the result hashed as received", what, kind, e)
	}
}

// TestReadBeyondDoubleAsReceived: a resources/read or prompts/get result
// holding a number beyond a double's range (1e999: in a resource's or a
// text content's _meta, in the result's) is a result like any other, as
// a tools/call's is (TestResultBeyondDoubleAsReceived), from a stdio
// server and an HTTP one, parked or not: the client gets it as the
// server sent it, with its receipt, and its entry hashes it as received
// (result_canonical false). The read failed with go-sdk's words for its
// struct fields ("json: cannot unmarshal \"1e999\" into Go struct field
// …"), and had no entry. A result nested past go-sdk's bound (1001
// levels, in _meta) is likewise passed on; one past encoding/json's
// (10001) fails the read alone, naming the server. From a stdio server
// the client was told of either "provlog: an answer nested deeper than
// go-sdk reads", as if the server had said it; from an HTTP one (in an
// event stream or a JSON body) go-sdk ended the connection, failing the
// read and every request after it until the server was reconnected.
func TestReadBeyondDoubleAsReceived(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	url := serveHTTP(t, p)
	fronts := map[string]*pipeClient{"older": newPipeClient(t, p), "parked": nil}
	for front, pc := range fronts {
		for _, name := range []string{"bignum", "bignummeta", "deep1001"} {
			want := rawReadResults[name]
			answer, wrote := readRaw(t, l, pc, url, "raw+raw://"+name, "")
			checkReadAsReceived(t, l, "stdio "+front+" resources/read "+name, log.KindResourceRead, answer, wrote, want.resource, `"x"`)
			answer, wrote = readRaw(t, l, pc, url, "", "raw__"+name)
			checkReadAsReceived(t, l, "stdio "+front+" prompts/get "+name, log.KindPromptGet, answer, wrote, want.prompt, `"x"`)
		}
		for _, uri := range []string{"raw+raw://deep10001", ""} {
			answer, wrote := readRaw(t, l, pc, url, uri, "raw__deep10001")
			if !bytes.Contains(answer, []byte(`provlog: server \"raw\": the answer is not a JSON-RPC message the proxy can read: `)) || len(wrote) > 0 {
				t.Errorf("stdio %s %q deep10001: the client got %.300s, %d entries written; want an error naming the server, none", front, uri, answer, len(wrote))
			}
		}
	}
	for _, session := range []string{"2025-11-25", statelessProtocol} {
		l := newTestLog(t)
		var name, contentType string
		p := readOddProxy(t, l, session, func(w http.ResponseWriter, r *http.Request, method string) {
			result := rawReadResults[name].resource
			if method == "prompts/get" {
				result = rawReadResults[name].prompt
			}
			answer := `{"jsonrpc":"2.0","id":` + callRequestID(t, r) + `,"result":` + result + "}"
			if w.Header().Set("Content-Type", contentType); contentType == "text/event-stream" {
				answer = "id: e1\ndata: " + answer + "\n\n"
			}
			w.Write([]byte(answer))
		})
		url := serveHTTP(t, p)
		fronts := map[string]*pipeClient{"older": newPipeClient(t, p), "newer": nil}
		for front, pc := range fronts {
			for _, contentType = range []string{"text/event-stream", "application/json"} {
				what := "HTTP " + session + " " + front + " " + contentType + " "
				for _, name = range []string{"bignum", "bignummeta", "deep1001"} {
					answer, wrote := readRaw(t, l, pc, url, "m+res://x", "")
					checkReadAsReceived(t, l, what+"resources/read "+name, log.KindResourceRead, answer, wrote, rawReadResults[name].resource, `"x"`)
					answer, wrote = readRaw(t, l, pc, url, "", "m__x")
					checkReadAsReceived(t, l, what+"prompts/get "+name, log.KindPromptGet, answer, wrote, rawReadResults[name].prompt, `"x"`)
				}
				name = "deep10001"
				for _, uri := range []string{"m+res://x", ""} {
					answer, wrote := readRaw(t, l, pc, url, uri, "m__x")
					if !bytes.Contains(answer, []byte(`provlog: server \"m\": the answer is not a JSON-RPC message the proxy can read: `)) || len(wrote) > 0 {
						t.Errorf("%s%q deep10001: the client got %.300s, %d entries written; want an error naming the server, none", what, uri, answer, len(wrote))
					}
				}
			}
		}
	}
}

package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// oddResultCase is a call of the raw stdio server's tool name (rawResults)
// and of an HTTP server that answers with the same result, through the
// pipe front: path "own" (the front's) or "SDK" (a progress token).
type oddResultCase struct{ server, name, path string }

// oddResultCalls makes, for each of names, a call of each kind of server
// through each path of the pipe front, and hands check the client's
// answer and the call's entries (its call and call.result as one).
func oddResultCalls(t *testing.T, names []string, check func(tc oddResultCase, answer []byte, e map[string]any)) {
	down := oddDownstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage
			Params struct{ Arguments struct{ Result string } }
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + rawResults[m.Params.Arguments.Result] + "}\n\n"))
	})
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw"), {ID: "h", URL: down}}, nil)
	waitRouted(t, p, "raw__ok", "h__x")
	pc := newPipeClient(t, p)
	for _, server := range []string{"stdio", "HTTP"} {
		for _, name := range names {
			for path, meta := range map[string]string{"own": ``, "SDK": `,"_meta":{"progressToken":"p"}`} {
				tool, args := "raw__"+name, `{}`
				if server == "HTTP" {
					tool, args = "h__x", `{"result":"`+name+`"}`
				}
				before := l.size(t)
				pc.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + meta + `}}`)
				answer := pc.read()
				e, _ := l.callAt(t, before)
				check(oddResultCase{server, name, path}, answer, e.Fields)
			}
		}
	}
}

// passedAsReceived checks that the client got result as the server sent
// it, with its receipt, and that e, its call's entries, hash it as
// received (result_canonical false), as no error.
func passedAsReceived(t *testing.T, tc oddResultCase, answer []byte, e map[string]any, result string) {
	t.Helper()
	var a struct {
		Result struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
	}
	json.Unmarshal(answer, &a) // 1e999 is no float64: the rest is read
	body, _, _ := strings.Cut(strings.TrimPrefix(result, "{"), `"_meta":{`)
	if !bytes.Contains(answer, []byte(body)) || bytes.Contains(answer, []byte(`"error"`)) || a.Result.Meta[ReceiptKey] == nil {
		t.Errorf("%v: the client got %.300s, want the result as sent with its receipt", tc, answer)
	}
	sum := sha256.Sum256([]byte(result))
	if e["is_error"] != false || e["error"] != nil || e["result_canonical"] != false || e["result_sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("%v: the call.result %v, want the result hashed as received, no error", tc, e)
	}
}

// TestResultBeyondDoubleAsReceived: a result holding a number beyond a
// double's range (1e999, in structuredContent or in _meta) is a result
// like any other, whichever kind the server is: the client gets it as the
// server sent it, with its receipt, and its call.result hashes it as
// received (result_canonical false), not an error. Over HTTP it was so;
// from a stdio server the call failed with go-sdk's words for its
// decoding ("json: cannot unmarshal \"1e999\" into Go struct field …"),
// and was recorded as failed. Both paths of the pipe front.
func TestResultBeyondDoubleAsReceived(t *testing.T) {
	oddResultCalls(t, []string{"bignum", "bignummeta"}, func(tc oddResultCase, answer []byte, e map[string]any) {
		passedAsReceived(t, tc, answer, e, rawResults[tc.name])
	})
}

// TestDeepResultAsOverHTTP: a stdio server's answer nested deeper than
// go-sdk reads is taken as an HTTP server's is: a result within
// encoding/json's bound (1001 levels) is passed on and hashed as
// received; one past it (10001) fails its call alone, the client and
// the call.result told the same, and a call in flight on the same
// connection is answered. go-sdk ended the stdio connection at either
// (its decoder stops at 1000 levels, its stream reader at 10000),
// failing the call with its words and every call in flight as cut off,
// and the server was restarted.
func TestDeepResultAsOverHTTP(t *testing.T) {
	const want = "not a JSON-RPC message the proxy can read"
	oddResultCalls(t, []string{"deep1001", "deep10001"}, func(tc oddResultCase, answer []byte, e map[string]any) {
		if tc.name == "deep1001" {
			passedAsReceived(t, tc, answer, e, rawResults[tc.name])
			return
		}
		var a struct{ Error struct{ Message string } }
		json.Unmarshal(answer, &a)
		if !strings.Contains(a.Error.Message, want) || !strings.Contains(a.Error.Message, "exceeded max depth") {
			t.Errorf("%v: the client got %.300s, want an error saying %q", tc, answer, want)
		}
		if e["is_error"] != true || "provlog: "+e["error"].(string) != a.Error.Message {
			t.Errorf("%v: the call.result %v, want the error the client got", tc, e)
		}
	})

	held := filepath.Join(t.TempDir(), "held")
	cfg := rawServerConfig(t, "raw")
	cfg.Env[rawHeldEnv] = held
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	pc := newPipeClient(t, p)
	pc.send(`{"jsonrpc":"2.0","id":"later","method":"tools/call","params":{"name":"raw__later","arguments":{}}}`)
	waitFor(t, "the server to hold the first call", func() bool { _, err := os.Stat(held); return err == nil })
	pc.send(`{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"raw__deep10001","arguments":{}}}`)
	for range 2 {
		answer := pc.read()
		if bytes.Contains(answer, []byte(`"id":"later"`)) && !bytes.Contains(answer, []byte(`"text":"ok"`)) {
			t.Errorf("a call in flight when another's answer was nested too deep: %.300s", answer)
		}
	}
}

// TestCallNullInputRequestAsReceived: a tools/call result holding an
// input request that is null ("inputRequests":{"a":null}), on which
// go-sdk's decoding panics, is from a stdio server what it is from an
// HTTP one: the call's outcome as received, which the client gets with
// its receipt and its call.result hashes. From a stdio server the client
// was told "provlog: internal error while handling tools/call" and the
// call had no call.result, as if the sidecar had died during it (a
// parked call's was "internal error while making the call").
func TestCallNullInputRequestAsReceived(t *testing.T) {
	result := rawResults["nullask"]
	down := oddDownstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"jsonrpc":"2.0","id":` + callRequestID(t, r) + `,"result":` + result + "}\n\n"))
	})
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw"), {ID: "h", URL: down}}, nil)
	waitRouted(t, p, "raw__nullask", "h__x")
	pc := newPipeClient(t, p)
	url := serveHTTP(t, p)
	for _, tool := range []string{"raw__nullask", "h__x"} {
		for path, meta := range map[string]string{"own": ``, "SDK": `,"_meta":{"progressToken":"p"}`, "parked": statelessMeta} {
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}` + meta + `}}`
			var got []byte
			if path == "parked" {
				_, b := postMCP(t, url, body, map[string]string{"Authorization": "Bearer " + testToken,
					"Mcp-Protocol-Version": statelessProtocol, "Mcp-Method": "tools/call", "Mcp-Name": tool})
				got = []byte(b)
			} else {
				pc.send(body)
				got = pc.read()
			}
			var answer struct {
				Result struct {
					Meta map[string]string `json:"_meta"`
				}
			}
			json.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(got), []byte("event: message\ndata: ")), &answer)
			if !bytes.Contains(got, []byte(`"inputRequests":{"a":null}`)) || bytes.Contains(got, []byte(`"error"`)) || answer.Result.Meta[ReceiptKey] == "" {
				t.Errorf("%s %s: the client got %.300s, want the result as sent with its receipt", tool, path, got)
				continue
			}
			e, _ := l.checkReceipt(t, answer.Result.Meta[ReceiptKey])
			canon, _ := log.Canonicalize([]byte(result))
			if e.Fields["is_error"] != false || e.Fields["error"] != nil || e.Fields["result_sha256"] != hexSHA256(canon) {
				t.Errorf("%s %s: the call.result %v, want the result hashed, no error", tool, path, e.Fields)
			}
		}
	}
}

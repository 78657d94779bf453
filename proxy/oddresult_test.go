package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestResultBeyondDoubleAsReceived: a result holding a number beyond a
// double's range (1e999, in structuredContent or in _meta) is a result
// like any other, whichever kind the server is: the client gets it as the
// server sent it, with its receipt, and its call.result hashes it as
// received (result_canonical false), not an error. Over HTTP it was so;
// from a stdio server the call failed with go-sdk's words for its
// decoding ("json: cannot unmarshal \"1e999\" into Go struct field …"),
// and was recorded as failed. Both fronts' paths: the pipe front's own
// and the SDK's (a call with a progress token).
func TestResultBeyondDoubleAsReceived(t *testing.T) {
	results := map[string]string{"bignum": rawResults["bignum"], "bignummeta": rawResults["bignummeta"]}
	down := oddDownstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage
			Params struct{ Arguments struct{ Result string } }
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + results[m.Params.Arguments.Result] + "}\n\n"))
	})
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw"), {ID: "h", URL: down}}, nil)
	waitRouted(t, p, "raw__bignum", "h__x")
	pc := newPipeClient(t, p)
	for _, server := range []struct{ name, tool string }{{"stdio", "raw__"}, {"HTTP", "h__x"}} {
		for name, result := range results {
			for path, meta := range map[string]string{"own": ``, "SDK": `,"_meta":{"progressToken":"p"}`} {
				tool, args := server.tool+name, `{}`
				if server.name == "HTTP" {
					tool, args = server.tool, `{"result":"`+name+`"}`
				}
				pc.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + meta + `}}`)
				got := pc.read()
				what := server.name + " " + name + " " + path
				var answer struct {
					Result struct {
						Meta map[string]json.RawMessage `json:"_meta"`
					}
				}
				json.Unmarshal(got, &answer) // 1e999 is no float64: the rest is read
				if !bytes.Contains(got, []byte(`1e999`)) || bytes.Contains(got, []byte(`"error"`)) || answer.Result.Meta[ReceiptKey] == nil {
					t.Errorf("%s: the client got %.300s, want the result as sent with its receipt", what, got)
					continue
				}
				var receipt string
				json.Unmarshal(answer.Result.Meta[ReceiptKey], &receipt)
				e, _ := l.checkReceipt(t, receipt)
				sum := sha256.Sum256([]byte(result))
				if e.Fields["is_error"] != false || e.Fields["error"] != nil || e.Fields["result_canonical"] != false ||
					e.Fields["result_sha256"] != hex.EncodeToString(sum[:]) {
					t.Errorf("%s: the call.result %v, want the result hashed as received, no error", what, e.Fields)
				}
			}
		}
	}
}

package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// BenchmarkScrub: what scrubbing costs a result (scrubJSON, run on every
// kept result and entry text when redaction is configured) and a line of
// a server's stderr (scrub, and a server's recent values' scrub), holding none of eight redacted values or one
// of them, in ASCII text and in text that is not all ASCII.
func BenchmarkScrub(b *testing.B) {
	var secrets []string
	for i := range 8 {
		secrets = appendSecrets(secrets, fmt.Sprintf("S3CRET-%d-Up%d", i, i*7))
	}
	for _, tc := range []struct{ name, word, with string }{
		{"ASCII", "lorem ipsum dolor ", ""},
		{"ASCIIHolding", "lorem ipsum dolor ", "s3cret-3-UP21"},
		{"Unicode", "l\u00f6rem \u00eepsum d\u00f8lor ", ""},
	} {
		text := strings.Repeat(tc.word, 16<<10/len(tc.word)) + tc.with
		canon, err := log.Canonicalize([]byte(`{"content":[{"type":"text","text":` + mustJSON(text) + `}]}`))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Result"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(canon)))
			for b.Loop() {
				scrubJSON(canon, secrets)
			}
		})
		line := text[len(text)-200:]
		b.Run("Line"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				scrub(line, secrets)
			}
		})
		// A line of a server's stderr as it is scrubbed: of the
		// server's recent values, whose cores and filters are made once
		// for the lines between two calls.
		b.Run("Recent"+tc.name, func(b *testing.B) {
			var r recentSecrets
			r.remember(secrets)
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				r.scrub(line)
			}
		})
	}
}

// BenchmarkCallWireRedacted: BenchmarkCallWire's proxied call, one
// client, to a server whose calls' password is redacted: each call's
// entry and kept result are scrubbed of the actor's recent values (eight
// passwords sent before, and the call's own).
func BenchmarkCallWireRedacted(b *testing.B) {
	text, _ := json.Marshal("Echo: " + strings.Repeat("x", 1024))
	down := wireDownstream(b, `{"content":[{"type":"text","text":`+string(text)+`}]}`)
	l := newTestLog(b)
	p := startProxy(b, l, []ServerConfig{{ID: "e", URL: down, Redact: []string{"password"}}}, nil)
	url := serveHTTP(b, p)
	cs := benchSession(b, url)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(hc.CloseIdleConnections)
	var id int
	call := func(password string) {
		id++
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"` + strings.Repeat("x", 1024) + `","password":"` + password + `"}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header = http.Header{
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Authorization":        {"Bearer " + testToken},
			"Mcp-Session-Id":       {cs.ID()},
			"Mcp-Protocol-Version": {"2025-11-25"},
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"text":"Echo: xxx`)) {
			b.Fatalf("HTTP %d, %v: %.300s", resp.StatusCode, err, got)
		}
	}
	for i := range 8 {
		call(fmt.Sprintf("S3CRET-%d-Up%d", i, i*7))
	}
	b.ReportAllocs()
	cpu := int64(proctest.CPU())
	for b.Loop() {
		call("S3CRET-now-Up99")
	}
	b.ReportMetric(float64(int64(proctest.CPU())-cpu)/float64(b.N), "cpu-ns/op")
}

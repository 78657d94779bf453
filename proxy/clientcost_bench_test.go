package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// BenchmarkClientAnswer: what reading a tools/call's answer costs a go-sdk
// (v1.8.0) client, alone in its process: 32 sessions (2025-11-25) call a
// 1 KiB echo on a server in another process (this test binary again,
// TestClientAnswerServer) that answers at once with fixed bytes, and
// cpu-ns/op is the benchmark process's CPU a call, the client's only.
// The answers:
//
//   - everything: npm server-everything's (chunked; its priming event
//     flushed before the response, both with uuid ids; "result" first).
//   - provlog: provlog's fast path's (priming event with its name and
//     retry, written with the response; Content-Length), with a receipt
//     of a 48,000-entry log's size.
//   - provlog-noreceipt, everything-receipt: either framing with and
//     without the receipt, to tell framing from receipt.
//   - everything-10ms, everything-30ms: everything's bytes answered after
//     that long: the client's CPU a call grows with its calls' latency
//     (fewer answers a wake-up), whatever the bytes.
//
// Session clientcpu (2 cores, noisy; six alternating rounds of 5,000
// calls, means): everything 279, provlog-noreceipt 282, provlog 320,
// everything-receipt 322, everything-10ms 346, everything-30ms 470 µs.
// provlog's framing costs the client nothing; its receipt some 40 µs
// (go-sdk decoding _meta into map[string]any); latency more than either.
//
//	go test ./proxy -run '^$' -bench ClientAnswer -benchtime 5000x
func BenchmarkClientAnswer(b *testing.B) {
	srv := exec.Command(os.Args[0], "-test.run=^$")
	srv.Env = append(os.Environ(), clientAnswerEnv+"=127.0.0.1:0")
	out, err := srv.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	sc := bufio.NewScanner(out)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		b.Fatal("the answer server did not start")
	}
	go io.Copy(io.Discard, out)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024 // as proxybench's client
	hc := &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)
	args := map[string]any{"message": strings.Repeat("x", 1024)}
	for _, a := range clientAnswers() {
		b.Run(a.name, func(b *testing.B) {
			const clients = 32
			css := make([]*mcp.ClientSession, clients)
			for i := range css {
				c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
				cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/" + a.name, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				css[i] = cs
			}
			b.ReportAllocs()
			cpu := int64(proctest.CPU())
			var next atomic.Int32
			b.SetParallelism(clients / 2)
			b.RunParallel(func(pb *testing.PB) {
				cs := css[int(next.Add(1)-1)%clients]
				for pb.Next() {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
					if err != nil || len(res.Content) != 1 || a.receipt && res.Meta[ReceiptKey] == nil {
						b.Fatal(err, res)
					}
				}
			})
			b.ReportMetric(float64(int64(proctest.CPU())-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// clientAnswerEnv, set to an address, makes the test binary
// BenchmarkClientAnswer's server (TestMain): it serves each of
// clientAnswers at /NAME until killed.
const clientAnswerEnv = "PROVLOG_CLIENTANSWER_SERVER"

func runClientAnswerServer() {
	mux := http.NewServeMux()
	for _, a := range clientAnswers() {
		mux.Handle("/"+a.name, a)
	}
	l, err := net.Listen("tcp", os.Getenv(clientAnswerEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.WriteString("listening " + l.Addr().String() + "\n")
	fmt.Fprintln(os.Stderr, http.Serve(l, mux))
	os.Exit(1)
}

// A clientAnswer answers a session's requests as one server would.
type clientAnswer struct {
	name     string
	provlog  bool // provlog's framing, else server-everything's
	receipt  bool
	delay    time.Duration
	text     string // the echo's text, JSON
	receiptJ string // the receipt, JSON
}

func clientAnswers() []clientAnswer {
	text, _ := json.Marshal("Echo: " + strings.Repeat("x", 1024))
	// A receipt as long as a 48,000-entry log's: 12 hashes in its proof.
	r := "c2sp.org/tlog-proof@v1\nextra JXMSISBwrH4Jvc4vK+vQZbuNyR4L80PS0YSdkXeo4F8=\nindex 48317\n"
	r += strings.Repeat("k69MxUTuwTcu38Zps2dbvCth87tQhyxk/aPodvRzdWM=\n", 12)
	r += "\nprovlog.local/vm\n48318\nz1K8Z9mO36U5e0o+YHHW9Vbwmn4G0sdOeoV8+1uqKhw=\n\n— provlog.local/vm sdv14EnPFwosZ0cW6jaCpjQ67acaz4w7WUYbEcYU9PO0smxrziL8IcuYthDJBpah2KMhb9/Tt/hGRzjuK9J3LSLoogs=\n"
	rj, _ := json.Marshal(r)
	as := []clientAnswer{
		{name: "everything"},
		{name: "provlog", provlog: true, receipt: true},
		{name: "provlog-noreceipt", provlog: true},
		{name: "everything-receipt", receipt: true},
		{name: "everything-10ms", delay: 10 * time.Millisecond},
		{name: "everything-30ms", delay: 30 * time.Millisecond},
	}
	for i := range as {
		as[i].text, as[i].receiptJ = string(text), string(rj)
	}
	return as
}

func (a clientAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		return
	}
	m := readIDMethod(r)
	switch {
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
		return
	case m.Method == "initialize":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "5e0c2b1e-8f8a-4d7b-9a51-3c2f4b6f1a77")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"answers","version":"1"}}}`)
		return
	}
	time.Sleep(a.delay)
	result := `{"content":[{"type":"text","text":` + a.text + `}]}`
	if a.receipt {
		result = `{"_meta":{"` + ReceiptKey + `":` + a.receiptJ + `},` + result[1:]
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	if a.provlog {
		// As callStream writes a fast call's answer: the priming event
		// and the response in one write, Content-Length by net/http.
		w.WriteHeader(http.StatusOK)
		w.Write(primeEvent("provlog48315"))
		w.Write(append(appendResponse([]byte("id: provlog48315_1\nevent: message\ndata: "), m.ID, json.RawMessage(result), nil), "\n\n"...))
		return
	}
	// As server-everything writes it: chunked, the priming event flushed
	// first, then the response event with "result" first.
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "id: 2b7c9e4a-1d3f-4a8b-9c6e-5f7a8b9c0d1e\ndata: \n\n")
	w.(http.Flusher).Flush()
	io.WriteString(w, "event: message\nid: 6a1d3c2f-9b8a-4e7c-8b62-4d3f5c7e2b88\ndata: {\"result\":"+result+",\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+"}\n\n")
}

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// otherURI is a second resource of a test server, whose updates tell the
// test how far the proxy has read a stream.
const otherURI = "fixture:///other"

// An ackReplayer wraps a server's handler: it keeps what the server wrote
// on the first listen for watchedURI, and at the head of the second's
// stream writes that listen's acknowledgement again, then a
// resources/updated for otherURI; the server's own answer follows once
// let is closed. The proxy reads a stream's notifications in order, so
// the update reaching a client subscribed to otherURI tells that the
// replayed acknowledgement was read.
type ackReplayer struct {
	h       http.Handler
	let     chan struct{}
	listens atomic.Int64 // listens for watchedURI sent
	mu      sync.Mutex
	first   bytes.Buffer // what the server wrote on the first listen's stream
}

func (a *ackReplayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Mcp-Method") != methodListen {
		a.h.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(watchedURI)) {
		a.h.ServeHTTP(w, r)
		return
	}
	switch a.listens.Add(1) {
	case 1:
		a.h.ServeHTTP(&keptWriter{ResponseWriter: w, a: a}, r)
	case 2:
		a.h.ServeHTTP(&replayWriter{ResponseWriter: w, a: a}, r)
	default:
		a.h.ServeHTTP(w, r)
	}
}

// ack returns the acknowledgement the server wrote on the first listen's
// stream, the data of its event.
func (a *ackReplayer) ack() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(a.first.Bytes()))
	for sc.Scan() {
		if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && bytes.Contains(data, []byte("notifications/subscriptions/acknowledged")) {
			return bytes.Clone(data)
		}
	}
	return nil
}

// A keptWriter keeps what it passes on in its ackReplayer.
type keptWriter struct {
	http.ResponseWriter
	a *ackReplayer
}

func (w *keptWriter) Write(b []byte) (int, error) {
	w.a.mu.Lock()
	w.a.first.Write(b)
	w.a.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *keptWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// A replayWriter writes the replayed events before the server's first
// write, and that write once they are let.
type replayWriter struct {
	http.ResponseWriter
	a        *ackReplayer
	replayed bool
}

func (w *replayWriter) Write(b []byte) (int, error) {
	if !w.replayed {
		w.replayed = true
		fmt.Fprintf(w.ResponseWriter, "event: message\ndata: %s\n\n", w.a.ack())
		fmt.Fprintf(w.ResponseWriter, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":%q}}\n\n", otherURI)
		w.Flush()
		<-w.a.let
	}
	return w.ResponseWriter.Write(b)
}

func (w *replayWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// TestStaleListenAck: an acknowledgement of a listen the proxy counted as
// ended (the server ended its stream) that comes again on a later listen
// for the same URI, ahead of the server's refusal of that listen, holds
// nothing: the client subscribing anew is told the server's refusal.
// Acknowledgements were matched to listens by URI alone, so the stale one
// marked the new listen held, and the client was told it subscribed to
// what the server refused.
func TestStaleListenAck(t *testing.T) {
	var asked atomic.Int64
	srv := subscribableServer("replaying", func(uri string) error {
		if uri == watchedURI && asked.Add(1) == 2 {
			return refusal(uri)
		}
		return nil
	})
	srv.AddResource(&mcp.Resource{Name: "o", URI: otherURI}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "other"}}}, nil
	})
	drop := make(chan struct{})
	a := &ackReplayer{let: make(chan struct{}), h: &listenCutter{when: func(n int64) <-chan struct{} {
		if n == 1 {
			return drop
		}
		return nil
	}}}
	let := sync.OnceFunc(func() { close(a.let) })
	t.Cleanup(let)
	url := serveStateless(t, srv, func(h http.Handler) http.Handler { a.h.(*listenCutter).h = h; return a })
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "fx", URL: url}}, nil)
	cl := newClientLog()
	cs := connectMemory(t, p, cl)
	ctx := context.Background()
	const uri, other = "fx+" + watchedURI, "fx+" + otherURI
	for _, u := range []string{other, uri} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatalf("subscribing to %s: %v", u, err)
		}
	}
	// Unsubscribed, the URI's listen is not renewed once it ends; the
	// next subscription asks the server anew.
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if ack := a.ack(); !bytes.Contains(ack, []byte(mcp.MetaKeySubscriptionID)) {
		t.Fatalf("the server's acknowledgement of the first listen names no listen: %s", ack)
	}
	d := p.downstreams()[0]
	down, err := d.session()
	if err != nil {
		t.Fatal(err)
	}
	close(drop)
	waitFor(t, "the proxy to count the first listen ended", func() bool {
		d.listens.mu.Lock()
		defer d.listens.mu.Unlock()
		_, held := d.listens.on[down][watchedURI]
		return !held
	})

	subscribed := make(chan error, 1)
	go func() { subscribed <- cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}) }()
	cl.waitUpdated(t, other, "the update that follows the replayed acknowledgement")
	let()
	err = <-subscribed
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != refusalCode {
		t.Fatalf("subscribing anew: %v, want the server's refusal %d", err, refusalCode)
	}
	if n := a.listens.Load(); n != 2 {
		t.Errorf("the server was sent %d listens for the URI, want 2", n)
	}
}

// TestListenAckWithoutID: a server whose acknowledgements name no listen
// (the revision requires _meta's io.modelcontextprotocol/subscriptionId;
// a server of an earlier draft leaves it out) has its subscriptions held
// by the URIs they list, and the client hears the resource's updates.
func TestListenAckWithoutID(t *testing.T) {
	srv := subscribableServer("idless", nil)
	var stripped atomic.Int64
	url := serveStateless(t, srv, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&idlessWriter{ResponseWriter: w, stripped: &stripped}, r)
		})
	})
	// Short, so that a run that waits for an acknowledgement naming the
	// listen fails soon.
	cfg := ServerConfig{ID: "fx", URL: url, Timeout: 3 * time.Second}
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	cl := newClientLog()
	cs := connectMemory(t, p, cl)
	ctx := context.Background()
	const uri = "fx+" + watchedURI
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribing: %v", err)
	}
	if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
		t.Fatal(err)
	}
	cl.waitUpdated(t, uri, "after subscribing")
	if stripped.Load() == 0 {
		t.Error("no acknowledgement had the listen's id taken out")
	}
}

// subscriptionIDMeta is the _meta of go-sdk's acknowledgement, which
// holds the listen's id alone.
var subscriptionIDMeta = regexp.MustCompile(`"_meta":\{"io\.modelcontextprotocol/subscriptionId":[^}]*\},?`)

// An idlessWriter passes a server's writes on without the listen's id in
// its acknowledgements.
type idlessWriter struct {
	http.ResponseWriter
	stripped *atomic.Int64 // acknowledgements written without it
}

func (w *idlessWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("notifications/subscriptions/acknowledged")) && subscriptionIDMeta.Match(b) {
		w.stripped.Add(1)
		if _, err := w.ResponseWriter.Write(subscriptionIDMeta.ReplaceAll(b, nil)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *idlessWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

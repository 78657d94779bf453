package proxy

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestRedactedURIQuery: a resource URI whose query holds a parameter the
// server's redact list names is forwarded as the client wrote it and
// recorded with that value replaced; the value reaches neither the log
// nor a blob, though the server echoes the URI in its contents and in an
// error.
func TestRedactedURIQuery(t *testing.T) {
	const secret = "sk-uri-secret-5678"
	srv := mcp.NewServer(&mcp.Implementation{Name: "r", Version: "1"}, nil)
	var got []string
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "f", URITemplate: "file:///{+path}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			got = append(got, req.Params.URI)
			if bytes.Contains([]byte(req.Params.URI), []byte("fail")) {
				return nil, &jsonrpc.Error{Code: -32002, Message: "cannot read " + req.Params.URI}
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "b", URL: down.URL, Redact: []string{"Token"}, RedactIgnoreCase: true, Retain: RetainFull}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	uri := "file:///a?x=1&token=" + secret + "&TOKEN=sk%2Dother%2Dsecret#frag"
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "b+" + uri})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != uri {
		t.Fatalf("the server got %q, want %q as the client wrote it", got, uri)
	}
	e := l.readReceipt(t, res.Meta, log.KindResourceRead)
	if want := "file:///a?x=1&token=[redacted]&TOKEN=[redacted]#frag"; e.URI != want {
		t.Errorf("recorded URI %q, want %q", e.URI, want)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "b+file:///fail?token=" + secret}); err == nil || len(got) != 2 {
		t.Fatalf("a read the server refuses: %v (the server got %d reads)", err, len(got))
	}

	for i := range l.size(t) {
		if b := l.entry(t, i); bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("sk-other-secret")) {
			t.Errorf("entry %d holds a redacted value: %s", i, b)
		}
	}
	filepath.WalkDir(l.blobDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("sk-other-secret")) {
				t.Errorf("blob %s holds a redacted value: %s", path, b)
			}
		}
		return nil
	})
}

// TestLoggedURI: a subscription's URI and error, when the sidecar's log
// shows them, have the values of redacted query parameters replaced and
// scrubbed (the warnings on failed subscriptions wrote them as sent).
func TestLoggedURI(t *testing.T) {
	d := &downstream{cfg: ServerConfig{ID: "s", Redact: []string{"token"}, RedactIgnoreCase: true}}
	uri := "file:///a?x=1&TOKEN=subSecret-77"
	shown, why := d.loggedURI(uri, errors.New("cannot subscribe to "+uri))
	if strings.Contains(shown, "subSecret-77") || strings.Contains(why, "subSecret-77") {
		t.Errorf("logged %q, %q: the redacted value is there", shown, why)
	}
	if !strings.Contains(shown, "x=1") || !strings.Contains(shown, "[redacted]") {
		t.Errorf("logged URI %q: want the rest kept and the value [redacted]", shown)
	}
}

// TestSDKLogURIRedacted: go-sdk's front server logs the URI of every
// subscription, unsubscription and update it sends, as the client wrote
// it; the sidecar's log shows it with its redacted query values
// replaced. It held them.
func TestSDKLogURIRedacted(t *testing.T) {
	const secret = "sk-subscribed-4242"
	srv := mcp.NewServer(&mcp.Implementation{Name: "r", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "f", URITemplate: "file:///{+path}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "b", URL: down.URL, Redact: []string{"token"}}}, func(o *Options) { o.Logger = debugLogger(&buf) })
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	uri := "file:///a?x=1&token=" + secret
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "b+" + uri}); err != nil {
		t.Fatal(err)
	}
	srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "b+" + uri}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "go-sdk's lines of the subscription logged", func() bool {
		return len(linesWith(&buf, "resource subscribed")) > 0 && len(linesWith(&buf, "resource unsubscribed")) > 0
	})
	if got := linesWith(&buf, secret); len(got) > 0 {
		t.Errorf("the sidecar's log holds the redacted value: %q", got)
	}
	if got := linesWith(&buf, "resource subscribed"); !strings.Contains(got[0], "token=[redacted]") {
		t.Errorf("logged %q, want the URI with its token [redacted]", got)
	}
}

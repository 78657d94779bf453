package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestClassifyOnePlace: every front and downstream word a call's outcome
// in classify, the same for the same outcome. (The SDK's path and the
// fast path each had their own, and logged a dying HTTP downstream
// differently.)
func TestClassifyOnePlace(t *testing.T) {
	d := &downstream{p: &Proxy{logger: slog.New(slog.DiscardHandler)}, cfg: ServerConfig{ID: "s", Timeout: time.Second}}
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, stop := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer stop()
	werr := &jsonrpc.Error{Code: -32602, Message: "bad SECRET value"}
	for _, tc := range []struct {
		name      string
		ctx, cctx context.Context
		o         outcome
		text      string // the entry's error text ("" for none)
		verbatim  bool   // the client gets the server's own error
	}{
		{"result", live, live, outcome{result: []byte(`{"content":[]}`)}, "", false},
		{"tool error", live, live, outcome{result: []byte(`{"isError":true}`), isError: true}, "", false},
		{"server's JSON-RPC error", live, live, outcome{wireErr: werr, err: errors.New("x")}, "bad [redacted] value", true},
		{"cancelled", cancelled, cancelled, outcome{err: context.Canceled}, "cancelled by the client", false},
		{"timeout", live, expired, outcome{err: context.DeadlineExceeded}, `server "s" did not answer t within 1s`, false},
		// The server's answer to the cancellation that ended the call
		// is not its answer to the call (it raced the classification).
		{"cancelled, then answered", cancelled, cancelled, outcome{err: context.Canceled, wireErr: werr}, "cancelled by the client", false},
		{"timeout, then answered", live, expired, outcome{err: context.DeadlineExceeded, wireErr: werr}, `server "s" did not answer t within 1s`, false},
		{"connection closed", live, live, outcome{err: io.ErrUnexpectedEOF, lost: true}, `server "s" closed the connection during the call`, false},
		{"other", live, live, outcome{err: errors.New("HTTP 500: SECRET")}, `server "s": HTTP 500: [redacted]`, false},
	} {
		c := &call{secrets: &callSecrets{list: []string{"SECRET"}}}
		err := d.classify(tc.ctx, tc.cctx, nil, "t", c, tc.o)
		if tc.text == "" {
			if err != nil || c.errText != "" || c.isError != tc.o.isError {
				t.Errorf("%s: error %v, entry %q, isError %v", tc.name, err, c.errText, c.isError)
			}
			continue
		}
		if !c.isError || !strings.HasPrefix(c.errText, tc.text) {
			t.Errorf("%s: entry error %q (isError %v), want %q", tc.name, c.errText, c.isError, tc.text)
		}
		var le errLocal
		if tc.verbatim != (err == werr) || !tc.verbatim && !errors.As(err, &le) {
			t.Errorf("%s: the client gets %#v", tc.name, err)
		}
	}
}

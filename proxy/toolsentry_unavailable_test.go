package proxy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// blipRecorder fails the first tools entry it is given (every one, if
// always), as a shared log's store does while its database restarts
// (log.ErrUnavailable: nothing written, the next commit may pass), and
// appends everything else.
type blipRecorder struct {
	next   Recorder
	always bool
	failed atomic.Bool
}

func (r *blipRecorder) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	if bytes.Contains(entry, []byte(`"kind":"tools"`)) && (r.failed.CompareAndSwap(false, true) || r.always) {
		return nil, fmt.Errorf("committing: %w: the database system is shutting down (test)", log.ErrUnavailable)
	}
	return r.next.Append(ctx, entry)
}

// TestToolsEntryAfterUnavailableStore: DESIGN §2 "Which tool was called":
// a tools entry is written when a downstream's tool list is first read,
// and call.tool_sha256 names the definition the call was made against;
// the proxy's own rule (recordTools) is that a ready sidecar has every
// server's tools entry. When that first tools entry meets a store that is
// only unavailable for a moment (a PostgreSQL restart under a shared log),
// a call of the server's tools writes it again before its own entry, and
// is made against a definition the log holds; while the entry cannot be
// written, calls are refused and reach no server.
//
// Before, the failure was logged and never retried: the server counted
// as up, every later list equalled the one noted as listed and was
// skipped, and calls were recorded (and answered with receipts) against a
// tool_sha256 that no entry of the log held. Found by the pgprobe
// session: a sidecar restarted while its PostgreSQL cluster restarted
// (pg_ctl restart -m immediate) logged "recording a server's tool list
// failed", served on with /healthz "ok", and recorded 408 calls whose
// tool_sha256 appeared in no tools entry.
func TestToolsEntryAfterUnavailableStore(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "fx")}, func(o *Options) {
		o.Log = &blipRecorder{next: l.seq}
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"})
	if err != nil || res.IsError {
		t.Fatalf("the call after the store's moment of unavailability: %v %v", err, res)
	}
	listed := map[string]bool{}
	var want string
	for i := range l.size(t) {
		e, err := log.ParseEntry(l.entry(t, i))
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case log.KindTools:
			if tools, ok := e.Fields["tools"].([]any); ok {
				for _, x := range tools {
					if m, ok := x.(map[string]any); ok {
						listed[fmt.Sprint(m["sha256"])] = true
					}
				}
			}
		case log.KindCall:
			if strings.HasSuffix(fmt.Sprint(e.Fields["tool"]), "ok") {
				want = fmt.Sprint(e.Fields["tool_sha256"])
			}
		}
	}
	if want == "" {
		t.Fatal("no call entry for fx__ok")
	}
	if !listed[want] {
		t.Errorf("the call entry's tool_sha256 %s is in no tools entry of the log (tools entries list %d definitions): the tools entry that failed while the store was unavailable was never written", want, len(listed))
	}
}

// TestToolsEntryNeverWritten: while a server's tools entry cannot be
// written, a call of its tools is refused, saying why, and nothing of it
// is recorded or reaches the server.
func TestToolsEntryNeverWritten(t *testing.T) {
	l := newTestLog(t)
	seen := filepath.Join(t.TempDir(), "seen")
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureAppendEnv] = seen
	p := startProxy(t, l, []ServerConfig{cfg}, func(o *Options) {
		o.Log = &blipRecorder{next: l.seq, always: true}
	})
	cs := connectMemory(t, p, nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__append", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), "was not made, as the log cannot record it") || !strings.Contains(err.Error(), "tool list") {
		t.Errorf("a call while its tools entry cannot be written: %v, want it refused", err)
	}
	for i := range l.size(t) {
		if e := mustParse(t, l.entry(t, i)); e.Kind == log.KindCall {
			t.Errorf("a call entry was written: %s", l.entry(t, i))
		}
	}
	if _, err := os.Stat(seen); !os.IsNotExist(err) {
		t.Errorf("the refused call reached the server (%v)", err)
	}
}

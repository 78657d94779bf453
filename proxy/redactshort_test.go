package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// recordArgs is what d's call entry records of the arguments raw.
func recordArgs(t *testing.T, d *downstream, raw string) string {
	t.Helper()
	canon, err := log.Canonicalize([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := d.recordedArgs("alice", []byte(raw), canon)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEmptyValueNotRemembered: a resources/read of "file:///x?token="
// (an empty redacted value) leaves the server's later records as they
// were: an empty value is in every text, and remembered it had every
// tool name and every argument of the server's later calls withheld.
func TestEmptyValueNotRemembered(t *testing.T) {
	d := &downstream{cfg: ServerConfig{ID: "s", Redact: []string{"token"}}}
	_, secrets := redactURI("file:///x?token=", d.cfg.Redact, false)
	d.secrets.remember(secrets) // as readResource does
	if got := d.secrets.scrub("search_files"); got != "search_files" {
		t.Errorf("tool name recorded as %q, want search_files", got)
	}
	if got, want := recordArgs(t, d, `{"q":"hello"}`), `{"q":"hello"}`; got != want {
		t.Errorf("arguments recorded as %s, want %s", got, want)
	}
}

// TestShortValueKeepsRecord: a redacted value shorter than minSecretLen
// (a pin of 7) is redacted where the list names it, but does not have
// every other argument, of that call or the server's later ones, nor a
// tool's name, withheld for holding a 7; a longer one sent again under
// another member is still cut out.
func TestShortValueKeepsRecord(t *testing.T) {
	d := &downstream{cfg: ServerConfig{ID: "s", Redact: []string{"pin"}}}
	for _, c := range []struct{ raw, want string }{
		{`{"pin":7,"count":17,"note":"order 2017"}`, `{"count":17,"note":"order 2017","pin":"[redacted]"}`},
		{`{"count":27}`, `{"count":27}`},
		{`{"pin":"hunter22","confirm":"hunter22"}`, `{"confirm":"[redacted]","pin":"[redacted]"}`},
	} {
		if got := recordArgs(t, d, c.raw); got != c.want {
			t.Errorf("%s recorded as %s, want %s", c.raw, got, c.want)
		}
	}
	if got := d.secrets.scrubName("get_v7"); got != "get_v7" {
		t.Errorf("tool get_v7 recorded as %q", got)
	}
	if got := d.secrets.scrubName("get_hunter22"); got != "get_[redacted]" {
		t.Errorf("tool get_hunter22 recorded as %q, want get_[redacted]", got)
	}
}

// TestClassifyLogsToolScrubbed: the sidecar's log lines of a call cut
// off by its stop or by a lost connection name the tool as its entry
// does, without the redacted value a server named it after.
func TestClassifyLogsToolScrubbed(t *testing.T) {
	const secret = "redact-tool-secret"
	for _, stopping := range []bool{false, true} {
		var logs bytes.Buffer
		d := &downstream{p: &Proxy{logger: slog.New(slog.NewTextHandler(&logs, nil))}, cfg: ServerConfig{ID: "s", Redact: []string{"token"}, Timeout: time.Second}}
		d.p.stopping.Store(stopping)
		d.secrets.remember([]string{secret})
		c := &call{actor: "a", tool: d.secrets.scrubName("t_" + secret)}
		d.classify(context.Background(), context.Background(), nil, "t_"+secret, c, outcome{err: io.ErrUnexpectedEOF, lost: true})
		if strings.Contains(logs.String(), secret) {
			t.Errorf("stopping %v: the log holds the value: %s", stopping, logs.String())
		}
	}
}

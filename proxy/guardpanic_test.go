package proxy

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestGuardedPanicScrubbed: the line logged when serving a call panics
// (serveGuarded, the HTTP fast path's and the pipe front's guard) names
// the tool as the call's entry does, scrubbed of the server's redacted
// values, and so is the panic's text: a server may name a tool after a
// value a client sent it, and a panic's text may quote either. No real
// call panics, so this one's context panics when read, with a text
// holding the value. The line named the tool and gave the text as they
// were.
func TestGuardedPanicScrubbed(t *testing.T) {
	const secret = "sk-Guarded/42+Qp"
	cfg := fixtureServerConfig(t, "fx")
	cfg.Redact = []string{"token"}
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) { o.Logger = debugLogger(&buf) })
	d := p.live["fx"].d
	d.secrets.remember([]string{secret})
	in := &callIn{d: d, tool: "t_" + secret, params: &mcp.CallToolParamsRaw{Name: "fx__t_" + secret}}
	_, rerr := p.serveGuarded(panicContext{context.Background(), "the server sent back " + secret}, in)
	if rerr == nil || rerr.Message != "provlog: internal error while handling tools/call" {
		t.Fatalf("serveGuarded: %v, want the guard's internal error (the call was to panic)", rerr)
	}
	checkLogScrubbed(t, &buf, secret, "panic while serving a call")
}

// panicContext is a context whose values cannot be read: reading one
// panics with text.
type panicContext struct {
	context.Context
	text string
}

func (c panicContext) Value(any) any { panic(c.text) }

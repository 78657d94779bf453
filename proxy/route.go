package proxy

import (
	"context"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server-to-client requests: where a downstream's sampling and
// elicitation requests go, and what is done to them on the way.

// askProtocol is the protocol revision the proxy asks a downstream
// server for. An HTTP server is asked for the newest the SDK speaks: one
// that serves 2026-07-28 is stateless, and a 2025-11-25 session with a
// stateless server cannot carry its sampling, elicitation or roots
// requests at all ("stateless servers cannot make requests"), while in
// 2026-07-28 they come back as input_required results (SEP-2322) that
// pass through to the client whose call it is, and its retry passes back.
// A server that does not serve 2026-07-28 refuses the probe
// (server/discover) and the SDK falls back to 2025-11-25. A stdio server
// is asked for 2025-11-25 (downstreamProtocolVersion): over one shared
// stdio session 2026-07-28 would drop its log messages (SEP-2577) for
// every older client, and skip the probe on every legacy server's wire.
func (d *downstream) askProtocol() string {
	if d.cfg.URL != "" {
		return "" // the SDK's newest, with its fallback
	}
	return downstreamProtocolVersion
}

// stateless reports whether d's session speaks the sessionless
// 2026-07-28 revision. Such calls go through the SDK, whose handler turns
// an input_required result into the older revisions' server-to-client
// requests on the call's own stream.
func (d *downstream) stateless() bool {
	cs, err := d.session()
	if err != nil {
		return false
	}
	ir := cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= statelessProtocol
}

// downMeta is the _meta a request of a front client carries on to d
// (forwardMeta). To a stateless server it also carries the client's own
// per-request capabilities (2026-07-28), so the server judges what the
// client can do, not what the proxy can; the SDK adds the proxy's only
// when the client sent none.
func (d *downstream) downMeta(m mcp.Meta) mcp.Meta {
	out := forwardMeta(m)
	if caps, ok := m[mcp.MetaKeyClientCapabilities]; ok && d.stateless() {
		out[mcp.MetaKeyClientCapabilities] = caps
	}
	return out
}

// forwardServerRequests is a receiving middleware of the downstream
// clients. It hands a server's elicitation/create to the proxy's
// forwarder before the SDK's client checks its requested schema: the
// proxy is not the client that fills in the form, and the SDK's check
// refused schemas the end client accepts (SEP-1330's titled multi-select
// enums: "items must specify enum for untitled enums", so the conformance
// scenario elicitation-sep1330-enums failed through a stdio downstream).
// The end client and the front server judge the request and its answer.
func (d *downstream) forwardServerRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.ElicitRequest); ok && method == "elicitation/create" && r.Params != nil {
			return d.elicit(ctx, r)
		}
		return next(ctx, method, req)
	}
}

// needsCallStream reports whether a front session's calls must go
// through the SDK's handler rather than the fast path: its client said it
// answers sampling or elicitation requests but keeps no standalone event
// stream open. The fast path answers a call with one JSON response, so a
// server's request during the call could only take the standalone stream,
// and without one it was lost ("undelivered message: stream not connected
// or already closed"; the conformance scenario tools-call-sampling failed
// in some runs). Through the SDK it rides the call's own event stream.
func (p *Proxy) needsCallStream(fs *frontSession) bool {
	if v, ok := p.streams.Load(fs.ss.ID()); ok && v.(*atomic.Int32).Load() > 0 {
		return false
	}
	ip := fs.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	return ip.Capabilities.Sampling != nil || ip.Capabilities.Elicitation != nil
}

// streamOpen counts a standalone event stream (a GET) of the session id
// as open until the returned function is called. A GET may come before
// the session is noted as initialized, so the count is kept by id.
func (p *Proxy) streamOpen(id string) (closed func()) {
	if id == "" {
		return func() {}
	}
	v, _ := p.streams.LoadOrStore(id, new(atomic.Int32))
	n := v.(*atomic.Int32)
	n.Add(1)
	return func() {
		// Kept only while open, so ids of no session do not pile up. (A
		// GET counted on a just-deleted counter is missed: its session's
		// calls then take the SDK's path, which is always right.)
		if n.Add(-1) == 0 {
			p.streams.CompareAndDelete(id, v)
		}
	}
}

package proxy

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Which protocol revision a downstream server is asked for and speaks,
// and what the sessionless revision changes for the requests it gets.

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
// 2026-07-28 revision.
func (d *downstream) stateless() bool {
	cs, err := d.session()
	return err == nil && sessionStateless(cs)
}

// sessionStateless reports whether cs speaks the sessionless 2026-07-28
// revision. Calls on such a session go through the SDK's client, which
// writes that revision's per-request envelope, and come from the SDK's
// front, whose handler turns an input_required result into the older
// revisions' server-to-client requests on the call's own stream.
func sessionStateless(cs *mcp.ClientSession) bool {
	ir := cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= statelessProtocol
}

// downMeta is the _meta a request of a front client carries on to its
// server (forwardMeta), with the client's own per-request capabilities
// (2026-07-28) where it sent them, so the server judges what the client
// can do, not what the proxy can. A server on a 2025-11-25 session reads
// them too where it knows them (go-sdk's ClientCapabilities prefers them
// to the session's), else ignores them; to a stateless server the SDK
// adds the proxy's only when the client sent none.
func downMeta(m mcp.Meta) mcp.Meta {
	out := forwardMeta(m)
	if caps, ok := m[mcp.MetaKeyClientCapabilities]; ok {
		out[mcp.MetaKeyClientCapabilities] = caps
	}
	return out
}

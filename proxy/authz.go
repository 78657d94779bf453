package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/authn"
)

// How the HTTP front's authentication reaches the handlers: the identity
// HTTPHandler authenticated rides the request's context, its claims as
// log.WithAuth.

type identityKey struct{}

// identityExtra is the key of the request's identity in its
// auth.TokenInfo's Extra.
const identityExtra = "dev.provlog/identity"

// requestIdentity is ctx carrying the identity (and its claims, as
// log.WithAuth) of the HTTP request req came in. On a stateful session
// go-sdk runs a handler in the context of the request that initialized
// the session, not of the request it handles: without this, an entry
// written through the SDK's handler (a task tool, a read, a prompt)
// would carry the claims of the token that opened the session, not of
// the one that sent the request. The request's own TokenInfo is set per
// request (HTTPHandler's verify), so the identity rides there.
func requestIdentity(ctx context.Context, req mcp.Request) context.Context {
	ex := req.GetExtra()
	if ex == nil || ex.TokenInfo == nil {
		return ctx
	}
	id, ok := ex.TokenInfo.Extra[identityExtra].(*authn.Identity)
	if !ok {
		return ctx
	}
	return log.WithAuth(context.WithValue(ctx, identityKey{}, id), id.Auth)
}

func identityOf(ctx context.Context) *authn.Identity {
	id, _ := ctx.Value(identityKey{}).(*authn.Identity)
	return id
}

// rpcPeek is what checkScopes reads of a JSON-RPC message.
// rpcPeek is one JSON-RPC message as the SDK reads it for routing: its
// members by their exact names. (Decoded into a struct, encoding/json
// matches names in any case, and "Method":"ping" beside "method":
// "tools/call" hid the call from the scope check, while the SDK, which
// matches case exactly, ran it.) Of two equal names the last counts, as
// it does for the SDK.
type rpcPeek map[string]json.RawMessage

// methodAndName returns the message's method and its params' name, each
// empty when absent or not a string.
func (m rpcPeek) methodAndName() (method, name string) {
	json.Unmarshal(m["method"], &method)
	var params map[string]json.RawMessage
	if json.Unmarshal(m["params"], &params) == nil {
		json.Unmarshal(params["name"], &name)
	}
	return method, name
}

// checkScopes returns a's 403 error when id's token lacks the scopes of
// the tool group body (one JSON-RPC message, or a batch) asks for: a
// downstream server's tool, resource or prompt, a provlog__ tool (the
// log's group), or another of the sidecar's own tools (the task tools).
// Requests of no group (initialize, lists, pings) need only a valid
// token. A body it cannot read must satisfy every group.
func (p *Proxy) checkScopes(a *authn.Authenticator, id *authn.Identity, body []byte) error {
	all := []authn.Group{authn.GroupTools, authn.GroupTasks, authn.GroupLog}
	missing := false
	for _, g := range all {
		missing = missing || !a.Allows(id, g)
	}
	if !missing {
		return nil // a token that may do everything (a static one, say) needs no look at the body
	}
	var msgs []rpcPeek
	t := bytes.TrimLeft(body, " \t\r\n")
	var err error
	if len(t) > 0 && t[0] == '[' {
		err = json.Unmarshal(t, &msgs)
	} else {
		msgs = make([]rpcPeek, 1)
		err = json.Unmarshal(t, &msgs[0])
	}
	if err != nil {
		for _, g := range all {
			if err := a.Require(id, g); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range msgs {
		if g, ok := p.groupOf(m.methodAndName()); ok {
			if err := a.Require(id, g); err != nil {
				return err
			}
		}
	}
	return nil
}

// groupOf returns the tool group of a request, if it has one.
func (p *Proxy) groupOf(method, name string) (authn.Group, bool) {
	switch method {
	case "tools/call":
		switch {
		case p.router.owner(toolNames, name) != nil:
			return authn.GroupTools, true
		case strings.HasPrefix(name, ownPrefix):
			return authn.GroupLog, true
		}
		return authn.GroupTasks, true
	case "resources/read", "resources/subscribe", "prompts/get", "completion/complete":
		return authn.GroupTools, true
	}
	return 0, false
}

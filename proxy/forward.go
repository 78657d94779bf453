package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// A progressRoute sends a downstream call's progress to the upstream
// session and token that asked for it.
type progressRoute struct {
	session *mcp.ServerSession
	token   any
	ctx     context.Context // the upstream call's, so HTTP progress rides its stream
}

func (p *Proxy) routeProgress(_ context.Context, params *mcp.ProgressNotificationParams) {
	tok, ok := params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := p.progress.Load(tok)
	if !ok {
		return // the call is over: progress after the result is dropped
	}
	r := v.(*progressRoute)
	_ = r.session.NotifyProgress(r.ctx, &mcp.ProgressNotificationParams{
		Meta:          params.Meta,
		ProgressToken: r.token,
		Progress:      params.Progress,
		Total:         params.Total,
		Message:       params.Message,
	})
}

// inOrder handles a stdio server's progress and log notifications as they
// are read (captureTransport.notify), so that they reach the client before
// the result the server wrote after them; it reports whether it did. One
// that does not decode is left to the SDK, which says what is wrong with
// it. Like every handler of a server's messages, it cannot crash the
// sidecar (guard).
func (d *downstream) inOrder(req *jsonrpc.Request) (handled bool) {
	defer func() {
		if r := recover(); r != nil {
			d.p.logger.Error("proxy: panic while handling a server's notification", "server", d.cfg.ID, "method", req.Method, "panic", fmt.Sprint(r))
			handled = true
		}
	}()
	switch req.Method {
	case "notifications/progress":
		var params mcp.ProgressNotificationParams
		if json.Unmarshal(req.Params, &params) != nil {
			return false
		}
		d.p.routeProgress(context.Background(), &params)
		return true
	case "notifications/message":
		var params mcp.LoggingMessageParams
		if json.Unmarshal(req.Params, &params) != nil {
			return false
		}
		d.logMessage(context.Background(), &mcp.LoggingMessageRequest{Params: &params})
		return true
	}
	return false
}

// Server-initiated messages go to the front session of the call they
// belong to: sample, elicitFrom and logTo, for the messages on a call's
// own HTTP stream (onStream) and for those the SDK's client hands over
// (createMessage, elicit, logMessage), which have to guess the call
// (d.caller).

// logMessage forwards a downstream log message the server sent outside
// a call's own stream, its logger name prefixed with the server id, to the
// sessions it may concern (logRecipients), in the context of each one's
// call in progress if it has one, so on that call's stream. The front
// server drops it for sessions whose level is higher. One that concerns
// no one actor is dropped, saying so at debug level without its data,
// which may hold what the server was given in confidence.
func (d *downstream) logMessage(_ context.Context, req *mcp.LoggingMessageRequest) {
	params := *req.Params
	d.logPrefix(&params)
	to, actors, calling := d.logRecipients()
	if actors > 1 {
		why := fmt.Sprintf("no call is in progress and %d actors have sessions", actors)
		if calling {
			why = fmt.Sprintf("calls of %d actors are in progress", actors)
		}
		d.p.logger.Debug("proxy: a log message from a server concerns no one caller; not forwarded",
			"server", d.cfg.ID, "message_level", params.Level, "logger", params.Logger, "actors", actors, "why", why)
		return
	}
	for _, c := range to {
		if c.session != nil {
			_ = c.session.Log(c.ctx, &params)
		}
	}
}

// logRecipients says where a server's log message that no call's stream
// carried may go (each with the context to send it in), how many actors
// it might concern, and whether calls are in progress. MCP does not tie
// such a message to a call, and one actor must not read what the server
// logged while serving another (a customer's name, a value redaction
// keeps out of the log), so it goes only where its actor is certain: to
// the sessions with calls in progress on the server if one actor made
// them all; with none in progress, to every session if all are one
// actor's (a sidecar beside one agent). With more actors, to none.
func (d *downstream) logRecipients() (to []*inflightCall, actors int, calling bool) {
	if calls, n := d.calls.bySession(); len(calls) > 0 {
		if n > 1 {
			return nil, n, true
		}
		return calls, n, true
	}
	who := map[string]bool{}
	unknown := 0 // sessions whose actor cannot be told: each may be another
	for ss := range d.p.server.Sessions() {
		a, ok := d.p.sessionActor(ss)
		if ok {
			who[a] = true
		} else {
			unknown++
		}
		to = append(to, &inflightCall{session: ss, actor: a, ctx: context.Background()})
	}
	if actors = len(who) + unknown; actors > 1 {
		return nil, actors, false
	}
	return to, actors, false
}

// sessionActor returns the actor of front session ss, if it can be
// told: an HTTP session's is its token's (noteActor); another's
// is the one its calls get (the config's, over stdio).
func (p *Proxy) sessionActor(ss *mcp.ServerSession) (string, bool) {
	if id := ss.ID(); id != "" {
		if v, ok := p.sessions.Load(id); ok {
			return v.(*frontSession).actor, true
		}
	}
	if a, ok := p.initActors.Load(ss); ok {
		return a.(string), true
	}
	a, err := p.actor(context.Background(), &mcp.CallToolRequest{Session: ss})
	return a, err == nil
}

// logTo sends a downstream log message to the session of call c, on its
// stream.
func (d *downstream) logTo(c *inflightCall, params *mcp.LoggingMessageParams) {
	d.logPrefix(params)
	if c.session != nil {
		_ = c.session.Log(c.ctx, params)
	}
}

// logPrefix names the server in a log message's logger.
func (d *downstream) logPrefix(params *mcp.LoggingMessageParams) {
	if params.Logger == "" {
		params.Logger = d.cfg.ID
	} else {
		params.Logger = d.cfg.ID + "/" + params.Logger
	}
}

// upstreamContext returns a context carrying the upstream call's values
// (so the request rides its HTTP stream) that ends when either the call or
// the downstream's request does.
func upstreamContext(downCtx context.Context, c *inflightCall) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(downCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// createMessage forwards a downstream sampling request to the client whose
// call is in progress.
func (d *downstream) createMessage(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return askCaller[mcp.CreateMessageResult](ctx, d, "sampling", "sampling/createMessage", req.Params)
}

// elicit forwards a downstream elicitation request likewise.
func (d *downstream) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return askCaller[mcp.ElicitResult](ctx, d, "elicitation", "elicitation/create", req.Params)
}

// askCaller sends a server's request that the SDK's client handed over
// (what: "sampling", "elicitation") to the client of the call in progress
// on d, and decodes its answer.
func askCaller[R any](ctx context.Context, d *downstream, what, method string, params any) (*R, error) {
	c, err := d.calls.caller(what + " request")
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "%v", err)
	}
	raw, err := d.askClient(ctx, c, method, params)
	if err != nil {
		return nil, err
	}
	res := new(R)
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: the client's %s result: %v", what, err)
	}
	return res, nil
}

// askClient sends a server's request (sampling/createMessage,
// elicitation/create or, bridged, roots/list, with params of the SDK's
// type) to the client of
// call c, on the call's own stream, and returns the client's result: on
// the fast front's stream of the call (callstream.go), else through the
// SDK's session in the call's context, which puts it on that call's
// stream too; a parked call's (park.go) waits for its client's retry.
// This is the one router of server-to-client requests. The answer's
// redacted fields join the call's secrets (and the server's recent ones),
// as its arguments' do: the server may echo them in its result or error.
func (d *downstream) askClient(ctx context.Context, c *inflightCall, method string, params any) (json.RawMessage, error) {
	raw, err := d.routeAsk(ctx, c, method, params)
	if err == nil && len(d.cfg.Redact) > 0 {
		if _, secrets, err := redactArgs(raw, d.cfg.Redact, d.cfg.RedactIgnoreCase); err == nil {
			secrets = append(secrets, writtenSecrets(raw, d.cfg.Redact, d.cfg.RedactIgnoreCase)...)
			d.remember(c.actor, secrets)
			c.secrets.add(secrets)
		}
	}
	return raw, err
}

// routeAsk is askClient's route to the client.
func (d *downstream) routeAsk(ctx context.Context, c *inflightCall, method string, params any) (json.RawMessage, error) {
	if err := clientDeclared(c.session, method); err != nil {
		return nil, err
	}
	if pc, ok := c.ctx.Value(parkKey{}).(*parkedCall); ok {
		return pc.ask(ctx, method, params) // a 2026-07-28 client's call (park.go)
	}
	uctx, cancel := upstreamContext(ctx, c)
	defer cancel()
	if s, ok := c.ctx.Value(callStreamKey{}).(*callStream); ok {
		return s.ask(uctx, d.p, method, params)
	}
	if c.session == nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: the call has no client session to ask")
	}
	var res any
	var err error
	switch p := params.(type) {
	case *mcp.CreateMessageParams:
		res, err = c.session.CreateMessage(uctx, p)
	case *mcp.CreateMessageWithToolsParams:
		res, err = c.session.CreateMessageWithTools(uctx, p)
	case *mcp.ElicitParams:
		res, err = c.session.Elicit(uctx, p)
	case *mcp.ListRootsParams:
		res, err = c.session.ListRoots(uctx, p)
	default:
		return nil, rpcError(jsonrpc.CodeMethodNotFound, "provlog: method %q is not offered to servers", method)
	}
	if err != nil {
		return nil, forwardError("client", err)
	}
	return json.Marshal(res)
}

// clientDeclared refuses a server's sampling or elicitation request for a
// client whose session did not declare that capability when it
// initialized: a client that never said it could answer would be left
// holding a request it does not expect (the SDK checked elicitation on
// one route and sampling on none). A session of the sessionless revision
// (no initialize) declares per request; its parked calls check there.
func clientDeclared(ss *mcp.ServerSession, method string) error {
	if ss == nil || ss.InitializeParams() == nil {
		return nil
	}
	caps := ss.InitializeParams().Capabilities
	switch {
	case method == "sampling/createMessage" && (caps == nil || caps.Sampling == nil):
		return rpcError(jsonrpc.CodeInvalidParams, "provlog: the client did not declare the sampling capability, so it cannot be asked for sampling/createMessage")
	case method == "elicitation/create" && (caps == nil || caps.Elicitation == nil):
		return rpcError(jsonrpc.CodeInvalidParams, "provlog: the client did not declare the elicitation capability, so it cannot be asked for elicitation/create")
	}
	return nil
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

// noteListenAcks passes the server's acknowledgements of subscriptions
// (notifications/subscriptions/acknowledged, SEP-2575) to the listens of
// its 2026-07-28 session (listen.go).
func (d *downstream) noteListenAcks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if a, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok {
			if cs, ok := req.GetSession().(*mcp.ClientSession); ok {
				d.listens.acknowledged(cs, a)
			}
		}
		return next(ctx, method, req)
	}
}

// resourceUpdated tells the subscribed clients, under the front URI.
func (d *downstream) resourceUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	_ = d.p.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{
		Meta: req.Params.Meta,
		URI:  d.cfg.uriPrefix() + req.Params.URI,
	})
}

// loggedURI is uri and err as the sidecar's log may show them: the values
// of the query parameters redact names replaced, as in a resource.read
// entry (redactURI), and scrubbed from the error's text; both scrubbed
// of the server's recent redacted values too.
func (d *downstream) loggedURI(uri string, err error) (string, string) {
	shown, secrets := redactURI(uri, d.cfg.Redact, d.cfg.RedactIgnoreCase)
	return d.secrets.scrub(shown), scrub(d.secrets.scrub(err.Error()), secrets)
}

// readResource serves resources/read for a resource or template of d.
func (d *downstream) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	d, ticket, cs, actor, err := d.startRead(ctx, req.Session, req.Extra, req.ProtocolVersion())
	if err != nil {
		return nil, err
	}
	defer d.gate.leave(ticket)
	uri := strings.TrimPrefix(req.Params.URI, d.cfg.uriPrefix())
	cctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	d.gate.forwarding(ticket, cancel)
	recorded, secrets := redactURI(uri, d.cfg.Redact, d.cfg.RedactIgnoreCase)
	d.remember(actor, secrets)
	recorded = d.secretsOf(actor).scrubName(recorded) // a server may name a resource after a value its actor sent it
	entry := log.ReadEntry{Kind: log.KindResourceRead, Actor: actor, Server: d.cfg.ID, URI: recorded}
	res, err := d.readLegs(cctx, cs, req.Session, req.ProtocolVersion(), req.ClientInfo(), req.Params.Meta, entry, d.readSent(uri, nil), req.Params.InputResponses, req.Params.RequestState,
		func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (any, error) {
			return cs.ReadResource(ctx, &mcp.ReadResourceParams{Meta: meta, URI: uri, InputResponses: responses, RequestState: state})
		})
	return frontReadAs[mcp.ReadResourceResult](ctx, d, req.ProtocolVersion(), log.KindResourceRead, res, err)
}

func (d *downstream) promptHandler(name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		d, ticket, cs, actor, err := d.startRead(ctx, req.Session, req.Extra, req.ProtocolVersion())
		if err != nil {
			return nil, err
		}
		defer d.gate.leave(ticket)
		entry := log.ReadEntry{Kind: log.KindPromptGet, Actor: actor, Server: d.cfg.ID, Prompt: name}
		rawArgs, _ := json.Marshal(req.Params.Arguments)
		if entry.Args, _, err = d.recordedArgs(actor, rawArgs, nil); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the prompt's arguments cannot be recorded: %v", err)
		}
		entry.Prompt = d.secretsOf(actor).scrubName(name) // a server may name a prompt after a value its actor sent it
		cctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
		defer cancel()
		d.gate.forwarding(ticket, cancel)
		res, err := d.readLegs(cctx, cs, req.Session, req.ProtocolVersion(), req.ClientInfo(), req.Params.Meta, entry, d.readSent(name, rawArgs), req.Params.InputResponses, req.Params.RequestState,
			func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (any, error) {
				return cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: meta, Name: name, Arguments: req.Params.Arguments, InputResponses: responses, RequestState: state})
			})
		return frontReadAs[mcp.GetPromptResult](ctx, d, req.ProtocolVersion(), log.KindPromptGet, res, err)
	}
}

// startRead takes a place for a read in the gate of d, or of the new
// instance that replaced it (enter), which it returns with the ticket (the
// caller leaves it), the session for the client's revision and the actor;
// it fails with the error the client gets, having left the gate.
func (d *downstream) startRead(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, protocol string) (*downstream, uint64, *mcp.ClientSession, string, error) {
	d, ticket, rerr := d.enter(ctx)
	if rerr != nil {
		return nil, 0, nil, "", rerr
	}
	cs, err := d.sessionFor(ctx, protocol)
	if err != nil {
		d.gate.leave(ticket)
		return nil, 0, nil, "", rpcError(jsonrpc.CodeInternalError, "provlog: %v", err)
	}
	actor, err := d.p.actor(ctx, &mcp.CallToolRequest{Session: ss, Extra: extra})
	if err != nil {
		d.gate.leave(ticket)
		return nil, 0, nil, "", rpcError(jsonrpc.CodeInvalidRequest, "provlog: %v", err)
	}
	return d, ticket, cs, actor, nil
}

// readLegs forwards a read (prompts/get, resources/read: send, with the
// client's inputResponses and requestState, a SEP-2322 retry as the
// client sent it) and records it as entry, with the result as received;
// it returns that result as recorded. For a client of an older revision on a
// 2026-07-28 session it is the bridge of calls (bridge.go) for reads: an
// input_required result becomes the server's requests to the client, on
// its own stream, and the read goes on with the answers, up to
// maxBridgeLegs legs, each recorded as an entry of its own before
// anything goes on, a later one naming the entry of the leg before
// (continues) and the hash of the answers it carries. A read whose entry
// cannot be written is withheld. A 2026-07-28 client's read on an older
// session is parked instead (parkread.go).
//
// Nothing is forwarded unless the entry will fit in the log: a prompt's
// arguments too large for it go to a blob first (fitRead), and a read
// that cannot fit even so is refused. The blob is purged again if no leg
// was recorded.
func (d *downstream) readLegs(ctx context.Context, cs *mcp.ClientSession, ss *mcp.ServerSession, protocol string, client *mcp.Implementation, clientMeta mcp.Meta,
	entry log.ReadEntry, sent string, responses mcp.InputResponseMap, state string, send readSend) (readResult, error) {
	bs, err := d.p.fitRead(ctx, &entry)
	if err != nil {
		return readResult{}, rpcError(jsonrpc.CodeInvalidParams, "provlog: the %s was not made, as the log cannot record it: %v", entry.Kind, err)
	}
	d.metaSecrets(entry.Actor, clientMeta)
	var res readResult
	if d.parksRead(cs, protocol) {
		// The leg's entry is written once the server's round or outcome
		// is in (parkread.go), which takes over the blobs then.
		res, err = d.parkRead(ctx, cs, ss, client, clientMeta, entry, sent, responses, state, send, &bs)
	} else {
		res, err = d.readLegsFitted(ctx, cs, ss, protocol, clientMeta, entry, responses, state, send, &bs)
	}
	if err != nil {
		bs.purge(d.p)
	}
	return res, err
}

// readLegsFitted is readLegs for a read that is not parked and whose
// entry fits; the first leg recorded takes over the blobs in bs.
func (d *downstream) readLegsFitted(ctx context.Context, cs *mcp.ClientSession, ss *mcp.ServerSession, protocol string, clientMeta mcp.Meta,
	entry log.ReadEntry, responses mcp.InputResponseMap, state string, send readSend, bs *blobSet) (readResult, error) {
	bridged := sessionStateless(cs) && protocol < statelessProtocol
	// Noted as in progress, as a call is, so that a server's request
	// during the read finds the client that made it.
	id := d.calls.begin(&inflightCall{session: ss, actor: entry.Actor, ctx: ctx})
	defer d.calls.end(id)
	var prev uint64 // the index of the leg before's entry
	for leg := 1; ; leg++ {
		meta := downMeta(clientMeta)
		if bridged {
			d.p.olderClientMeta(ss, meta)
		}
		d.p.injectTrace(ctx, meta)
		e := entry
		e.Continues = prev
		if len(responses) > 0 {
			sum, _, err := d.inputResponsesSum(e.Actor, responses)
			if err != nil {
				return readResult{}, rpcError(jsonrpc.CodeInvalidParams, "provlog: the %s was not made: its inputResponses cannot be recorded: %v", e.Kind, err)
			}
			e.InputResponsesSHA256 = sum
		}
		e.Time = time.Now()
		raw, typed, err := d.sendRead(ctx, e.Kind, cs, send, meta, responses, state)
		// A read the server answered 404 for its session did not run
		// (MCP 2025-11-25, transports, "Session Management"): it goes to a
		// new session, as a call does (forward); its entry is written
		// after the answer, once.
		for n := 0; err != nil && d.cfg.URL != "" && errors.Is(err, mcp.ErrSessionMissing) && ctx.Err() == nil; n++ {
			if n == maxSessionRenewals {
				err = fmt.Errorf("%w, on %d sessions in a row (each new one started for this %s); it was not made", err, n+1, e.Kind)
				break
			}
			next, rerr := d.renewSession(ctx, cs)
			if rerr != nil {
				err = fmt.Errorf("%w; the %s was not made, and a new session could not take it: %v", err, e.Kind, rerr)
				break
			}
			cs = next
			raw, typed, err = d.sendRead(ctx, e.Kind, cs, send, meta, responses, state)
		}
		if err != nil {
			return readResult{}, forwardError(d.cfg.ID, err)
		}
		ask, ok := inputAskOf(raw)
		last := !bridged || !ok // the result goes to the client
		// A leg the proxy carries on is held to it too: its entry would
		// say the agent read what it holds beside its inputRequests.
		if err := d.frontableRead(e.Kind, raw, typed, frontAsking(typed, protocol)); err != nil {
			return readResult{}, err
		}
		res, err := d.p.recordRead(ctx, &e, raw, typed)
		if err != nil {
			return readResult{}, rpcError(jsonrpc.CodeInternalError, "provlog: the %s was made but could not be recorded, so its result is withheld: %v", e.Kind, err)
		}
		bs.named(d.p, res.receipt.Index) // an entry names them now
		if last {
			return res, nil
		}
		if leg >= maxBridgeLegs {
			return readResult{}, rpcError(jsonrpc.CodeInternalError, "provlog: server %q still asked for input after %d legs of the %s; given up", d.cfg.ID, leg, e.Kind)
		}
		responses, state, prev = nil, ask.state, res.receipt.Index
		if len(ask.requests) > 0 {
			var rerr *jsonrpc.Error
			if responses, rerr = d.askInputs(ctx, ss, ask); rerr != nil {
				return readResult{}, rerr
			}
		}
	}
}

// frontReadAs returns as R (the SDK's result type) the result of a read
// of kind as the client gets it, from res as recorded (or readErr, the
// read's error), as a call's is (frontPrepare, from the canonical form
// its entry hashed), and leaves those bytes for rawReads, which has the
// SDK send them rather than its encoding of the R.
func frontReadAs[R any](ctx context.Context, d *downstream, protocol, kind string, res readResult, readErr error) (*R, error) {
	if readErr != nil {
		return nil, readErr
	}
	out := new(R)
	var front json.RawMessage
	f, err := d.frontPrepare(readMethod(kind), res.raw, res.canon)
	if err == nil {
		if front, err = f.result(res.raw, res.receipt.String()); err != nil {
			err = fmt.Errorf("it is recorded (log entry %d, provlog__prove gives its receipt): %w", res.receipt.Index, err)
		}
	}
	if err == nil && json.Unmarshal(front, out) != nil {
		err = readView(front, out) // what the SDK's types do not hold (sendRead)
	}
	if err != nil {
		return nil, d.notPassedOn(err)
	}
	if h, ok := ctx.Value(frontBytesKey{}).(*frontBytes); ok {
		h.raw = withProtocolResultType(front, protocol)
	}
	return out, nil
}

// rememberCompletion remembers the values of a completion's argument and
// context arguments that d's redact list names as d's recent redacted
// values, as a prompt's are: nothing records a completion, but the
// server may echo them (stderr, a later answer). The start of a value
// being typed, shorter than minSecretLen, is not: each would have every
// text of the server's holding it withheld whole.
func (d *downstream) rememberCompletion(actor string, params *mcp.CompleteParams) {
	if len(d.cfg.Redact) == 0 {
		return
	}
	args := map[string]string{}
	if params.Context != nil {
		maps.Copy(args, params.Context.Arguments)
	}
	if params.Argument.Name != "" {
		args[params.Argument.Name] = params.Argument.Value
	}
	if b, err := json.Marshal(args); err == nil {
		if _, secrets, err := redactArgs(b, d.cfg.Redact, d.cfg.RedactIgnoreCase); err == nil {
			d.remember(actor, slices.DeleteFunc(secrets, func(s string) bool { return len(s) < minSecretLen }))
		}
	}
}

// complete forwards completion/complete for a prompt or resource template
// argument to the server it belongs to.
func (p *Proxy) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if req.Params == nil || req.Params.Ref == nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: completion without a ref")
	}
	ref := *req.Params.Ref
	var d *downstream
	switch ref.Type {
	case "ref/prompt":
		d, ref.Name = p.router.prompt(ref.Name)
	case "ref/resource":
		var ok bool
		if d, ref.URI, ok = p.router.resource(ref.URI); !ok {
			d = nil
		}
	}
	empty := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	if d == nil {
		return empty, nil
	}
	cs, err := d.session()
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: %v", err)
	}
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Completions == nil {
		return empty, nil
	}
	params := *req.Params
	params.Meta = forwardMeta(params.Meta)
	params.Ref = &ref
	actor, _ := p.actor(ctx, &mcp.CallToolRequest{Session: req.Session, Extra: req.Extra})
	d.rememberCompletion(actor, &params)
	cctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	res, err := cs.Complete(cctx, &params)
	if err != nil {
		return nil, forwardError(d.cfg.ID, err)
	}
	return res, nil
}

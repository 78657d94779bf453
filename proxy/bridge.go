package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// The bridge between revisions (revision.go says when it is needed): a
// server on a 2026-07-28 session asks for the client's input in its
// result (SEP-2322: resultType "input_required", inputRequests keyed by
// the server's ids, an opaque requestState), where a client of an older
// revision expects the server's own requests during the call. For such a
// client serveCall turns each input request into that request
// (elicitation/create, sampling/createMessage, roots/list) on the call's
// own stream, and makes the call again with the client's answers as its
// inputResponses and the server's requestState echoed, as 2026-07-28's
// client would, until the server answers with a result of its own.
//
// Each leg goes through the call lifecycle as a call of its own: a call
// entry before it reaches the server, a call.result before anything goes
// on. A later leg's call entry says which leg it continues ("continues":
// the call.result of the input_required answer) and what it adds
// ("input_responses_sha256"); the client gets the last leg's result with
// that leg's receipt. The other way (a 2026-07-28 client, a server of
// 2025-11-25 that asks during the call) is park.go's.

// maxBridgeLegs bounds the legs of one bridged call, as go-sdk's client
// bounds its own retries.
const maxBridgeLegs = 10

// An inputAsk is the input an input_required result asks for.
type inputAsk struct {
	requests map[string]inputRequest // by the server's id
	state    string                  // requestState, to echo
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputRequired returns what leg c's result asks for, if it is an
// input_required result.
func inputRequired(c *call) (inputAsk, bool) {
	if c.isError || c.errText != "" {
		return inputAsk{}, false
	}
	return inputAskOf(c.result)
}

// inputAskOf returns what a result (of tools/call, prompts/get or
// resources/read, as received) asks for, if it is an input_required
// result.
func inputAskOf(result json.RawMessage) (inputAsk, bool) {
	if result == nil || !bytes.Contains(result, []byte(`"input_required"`)) {
		return inputAsk{}, false
	}
	var r struct {
		ResultType    string                  `json:"resultType"`
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}
	if json.Unmarshal(result, &r) != nil || r.ResultType != "input_required" {
		return inputAsk{}, false
	}
	return inputAsk{requests: r.InputRequests, state: r.RequestState}, true
}

// serveLegs serves call in, leg by leg while the server answers
// input_required for a client of an older revision, and returns the last
// leg and its receipt.
func (p *Proxy) serveLegs(ctx context.Context, in *callIn, actor string, span *opSpan) (*call, string, *jsonrpc.Error) {
	for leg := 1; ; leg++ {
		c, receipt, rerr := p.serveLeg(ctx, in, actor, span)
		if rerr != nil {
			return c, "", rerr
		}
		ask, ok := inputRequired(c)
		if !ok {
			return c, receipt, nil
		}
		if !in.bridges(c) {
			p.retries.note(c, ask.state)
			return c, receipt, nil
		}
		if in, rerr = p.answerInputs(ctx, in, c, ask, leg); rerr != nil {
			return c, "", rerr
		}
	}
}

// bridges reports whether an input_required answer to leg c of the call
// in is the proxy's to carry on: c went to a 2026-07-28 session for a
// client of an older revision. A 2026-07-28 client gets it as it is, and
// makes its retry itself (p.retries ties that to c).
func (in *callIn) bridges(c *call) bool {
	return c.newSession && in.protocol < statelessProtocol
}

// answerInputs asks in's client for what leg number leg (c) was asked,
// in the client's revision, and returns the next leg: the same call with
// the answers and the server's requestState. A client that refuses a
// request, or cannot take it, ends the call with its error.
func (p *Proxy) answerInputs(ctx context.Context, in *callIn, c *call, ask inputAsk, leg int) (*callIn, *jsonrpc.Error) {
	d := in.d
	if leg >= maxBridgeLegs {
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: server %q still asked for input after %d legs of the call (log entry %d); given up", d.cfg.ID, leg, c.index)
	}
	if len(ask.requests) == 0 {
		// The server is shedding load (SEP-2322): it asks for nothing and
		// wants the call again.
		return in.nextLeg(c, nil, ask.state), nil
	}
	responses, rerr := d.askInputs(ctx, in.session, ask)
	if rerr != nil {
		return nil, rerr
	}
	return in.nextLeg(c, responses, ask.state), nil
}

// askInputs asks the client of front session ss (in its revision) for
// the input ask names, one request at a time, and returns the answers as
// the server's next round takes them. A client that refuses a request,
// or cannot take it, ends the call with its error.
func (d *downstream) askInputs(ctx context.Context, ss *mcp.ServerSession, ask inputAsk) (mcp.InputResponseMap, *jsonrpc.Error) {
	ic := &inflightCall{session: ss, ctx: ctx}
	ids := slices.Sorted(maps.Keys(ask.requests))
	answers := make(map[string]json.RawMessage, len(ids))
	for _, id := range ids {
		r := ask.requests[id]
		params, err := inputParams(r)
		if err != nil {
			return nil, rpcError(jsonrpc.CodeInternalError, "provlog: server %q asked for input %q it cannot have from this client: %v", d.cfg.ID, id, err)
		}
		raw, err := d.askClient(ctx, ic, r.Method, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, rpcError(jsonrpc.CodeInternalError, "provlog: the request was cancelled while the client was asked for input")
			}
			return nil, rpcError(jsonrpc.CodeInternalError, "provlog: server %q asked the client for input %q (%s), which failed: %v", d.cfg.ID, id, r.Method, err)
		}
		answers[id] = raw
	}
	b, _ := json.Marshal(answers)
	var responses mcp.InputResponseMap
	if err := json.Unmarshal(b, &responses); err != nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: the client's answers to server %q cannot be passed on: %v", d.cfg.ID, err)
	}
	return responses, nil
}

// nextLeg is the call in again, after leg c, with responses and state.
func (in *callIn) nextLeg(c *call, responses mcp.InputResponseMap, state string) *callIn {
	next := *in
	params := *in.params
	params.InputResponses, params.RequestState = responses, state
	next.params, next.continues, next.secrets, next.id = &params, c.resultIndex, c.secrets, nil
	next.first = c          // recorded with c's tool and arguments, as sent again
	next.start = time.Now() // the client has answered
	return &next
}

// inputParams decodes one input request's params into the SDK's type for
// its method, which askClient sends to the client.
func inputParams(r inputRequest) (any, error) {
	var v any
	switch r.Method {
	case "elicitation/create":
		v = new(mcp.ElicitParams)
	case "sampling/createMessage":
		v = new(mcp.CreateMessageWithToolsParams)
	case "roots/list":
		v = new(mcp.ListRootsParams)
	default:
		return nil, fmt.Errorf("method %q is not one a server may ask for", r.Method)
	}
	if len(r.Params) > 0 && string(r.Params) != "null" {
		if err := json.Unmarshal(r.Params, v); err != nil {
			return nil, fmt.Errorf("its params: %w", err)
		}
	}
	return v, nil
}

// inputResponsesSum returns the hex SHA-256 of the JCS form of the
// inputResponses of a leg by actor as the server gets them, configured
// fields redacted (recordedArgs), and the redacted values.
func (d *downstream) inputResponsesSum(actor string, m mcp.InputResponseMap) (string, []string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", nil, err
	}
	canon, secrets, err := d.recordedArgs(actor, b, nil)
	if err != nil {
		return "", nil, err
	}
	return hexSHA256(canon), secrets, nil
}

// noteLogLevel remembers the level a front session's client set with
// logging/setLevel, which a bridged call carries to its server.
func (p *Proxy) noteLogLevel(method string, req mcp.Request) {
	if method != "logging/setLevel" {
		return
	}
	params, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
	ss, sok := req.GetSession().(*mcp.ServerSession)
	if !ok || !sok || params == nil || ss == nil {
		return
	}
	if _, had := p.logLevels.Swap(ss, params.Level); !had {
		go func() {
			ss.Wait()
			p.logLevels.Delete(ss)
		}()
	}
}

// withResultType is a tools/call result as a 2026-07-28 client gets it:
// with resultType, "complete" unless the server said otherwise (an older
// server's results have none), as the SDK's front gives every result of
// that revision.
func withResultType(raw json.RawMessage) json.RawMessage {
	if bytes.Contains(raw, []byte(`"resultType"`)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil || m["resultType"] != nil {
			return raw
		}
	}
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return raw
	}
	out := append(make([]byte, 0, len(t)+24), `{"resultType":"complete"`...)
	if rest := bytes.TrimLeft(t[1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, t[1:]...)
}

// withoutResultType is a result of a 2026-07-28 session (a tools/call's,
// a read's) as an older client gets it: without resultType, which its
// revision does not have (the SDK's front would pass it on as decoded),
// cut out of the result as it was made for the client. It was decoded and
// encoded again, its members sorted and "<" escaped, whenever it held
// "resultType" anywhere.
func withoutResultType(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"resultType"`)) && !bytes.Contains(raw, []byte(`\u`)) {
		return raw
	}
	for {
		out := withoutTop(raw, "resultType")
		if len(out) == len(raw) {
			return raw
		}
		raw = out // a result no client is given twice the member: all of it
	}
}

// retries ties the retries that 2026-07-28 clients make after an
// input_required result to the leg they continue: a retry of the same
// call (actor, server, tool, arguments and client as recorded, which
// log.Audit checks) carrying the
// requestState that result gave is its next leg. Two such results alike
// in all of that (no requestState, the same call made twice at once)
// leave their retries untied rather than tied to the wrong one. It forgets
// after maxRetryWait, and across a restart: such a retry is recorded
// untied (continues 0). It holds at most maxRetryWaits results, each
// actor at most maxRetryWaitsPerActor of them: beyond its share an
// actor's own oldest goes, beyond the bound the oldest of the actor
// holding the most. (One bound for all actors, oldest out, let one
// actor's 4,096 input_required results push out every other's, whose
// retries were then recorded untied.)
type retries struct {
	mu      sync.Mutex
	m       map[string]*retryWait
	byActor map[string][]string // each actor's keys, in the order noted
}

type retryWait struct {
	actor   string            // its leg's
	result  uint64            // the input_required call.result
	secrets *callSecrets      // its leg's
	tool    string            // its leg's tool and arguments as recorded, which the
	args    log.CanonicalJSON // retry's entry holds (retryKey matched them as sent);
	argsSum string            // args are kept up to maxRetryArgs bytes, their hash always
	n       int               // results noted under this key
	at      time.Time
}

const (
	maxRetryWait  = 10 * time.Minute
	maxRetryWaits = 4096
	// maxRetryWaitsPerActor is each actor's share of maxRetryWaits: a
	// quarter, as of the front's other caps (actorcap.go).
	maxRetryWaitsPerActor = maxRetryWaits / 4
	// maxRetryArgs bounds the arguments a retryWait keeps (4096 of them
	// hold 16 MiB at most): a retry whose arguments, recorded anew, are
	// not its leg's (scrubbed of other recent values) and longer is
	// recorded as a call of its own, as it was.
	maxRetryArgs = 4 << 10
)

func retryKey(c *call, state string) string {
	client := ""
	if c.client != nil { // as recorded: a leg names the client of the leg it continues
		client = truncate(c.client.Name, maxClientText) + "\x00" + truncate(c.client.Version, maxClientText)
	}
	sent := c.sent // with redaction: as recorded, the server's recent values change them
	if sent == "" {
		sent = c.tool + "\x00" + hexSHA256(c.args)
	}
	return c.actor + "\x00" + c.server + "\x00" + sent + "\x00" + client + "\x00" + state
}

// note remembers leg c, whose result was input_required with state.
func (r *retries) note(c *call, state string) {
	k := retryKey(c, state)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m, r.byActor = map[string]*retryWait{}, map[string][]string{}
	}
	if w, ok := r.m[k]; ok {
		if time.Since(w.at) < maxRetryWait {
			w.n++
			return
		}
		r.forget(k)
	}
	w := &retryWait{actor: c.actor, result: c.resultIndex, secrets: c.secrets, tool: c.tool, argsSum: hexSHA256(c.args), n: 1, at: time.Now()}
	if len(c.args) <= maxRetryArgs {
		w.args = c.args
	}
	r.m[k] = w
	r.byActor[c.actor] = append(r.byActor[c.actor], k)
	if len(r.byActor[c.actor]) > maxRetryWaitsPerActor {
		r.forget(r.byActor[c.actor][0])
	}
	if len(r.m) > maxRetryWaits {
		most := c.actor
		for a, keys := range r.byActor {
			if len(keys) > len(r.byActor[most]) {
				most = a
			}
		}
		r.forget(r.byActor[most][0])
	}
}

// forget takes the result noted under k out of the table.
func (r *retries) forget(k string) {
	w, ok := r.m[k]
	if !ok {
		return
	}
	delete(r.m, k)
	keys := r.byActor[w.actor]
	if i := slices.Index(keys, k); i >= 0 {
		keys = slices.Delete(keys, i, i+1)
	}
	if len(keys) == 0 {
		delete(r.byActor, w.actor)
		return
	}
	r.byActor[w.actor] = keys
}

// take returns the call.result a retry c (with state) continues and its
// leg's secrets, and gives c that leg's tool and arguments as recorded;
// 0 and nil if there is none to tell.
func (r *retries) take(c *call, state string) (uint64, *callSecrets) {
	k := retryKey(c, state)
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.m[k]
	if !ok {
		return 0, nil
	}
	r.forget(k)
	if w.n != 1 || time.Since(w.at) >= maxRetryWait {
		return 0, nil
	}
	if c.tool != w.tool || hexSHA256(c.args) != w.argsSum {
		if w.args == nil {
			return 0, nil
		}
		c.tool, c.args = w.tool, w.args
	}
	return w.result, w.secrets
}

// olderClientMeta adds to meta, the _meta of an older client's request
// to a 2026-07-28 session, what that revision carries per request and the
// client set for its session: its capabilities, so the server asks only
// for input the client can give (not the proxy's, which the SDK's client
// would add), and its log level (a 2026-07-28 server logs a request's
// messages at the level the request carries; none: no messages).
func (p *Proxy) olderClientMeta(ss *mcp.ServerSession, meta mcp.Meta) {
	if ss == nil {
		return
	}
	if lv, ok := p.logLevels.Load(ss); ok && meta[mcp.MetaKeyLogLevel] == nil {
		meta[mcp.MetaKeyLogLevel] = lv
	}
	ip := ss.InitializeParams()
	if _, ok := meta[mcp.MetaKeyClientCapabilities]; ok || ip == nil || ip.Capabilities == nil {
		return
	}
	caps := ip.Capabilities
	wire := map[string]any{}
	for k, v := range map[string]any{"experimental": caps.Experimental, "extensions": caps.Extensions} {
		if m, ok := v.(map[string]any); ok && m != nil {
			wire[k] = m
		}
	}
	if caps.Sampling != nil {
		wire["sampling"] = caps.Sampling
	}
	if caps.Elicitation != nil {
		wire["elicitation"] = caps.Elicitation
	}
	// The session's decoded capabilities cannot tell "roots": {} from no
	// roots at all (go-sdk's Roots is a struct value); a client that
	// declared listChanged has roots.
	if caps.RootsV2 != nil {
		wire["roots"] = caps.RootsV2
	} else if caps.Roots.ListChanged {
		wire["roots"] = map[string]any{"listChanged": true}
	}
	meta[mcp.MetaKeyClientCapabilities] = wire
}

package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// The reverse bridge (bridge.go is the other way): a 2026-07-28 client,
// which takes no requests from a server (its requests are sessionless),
// calls a tool of a server on a 2025-11-25 session (a stdio server pinned
// to that revision or speaking no newer one, a stateful HTTP server),
// which asks during the call: sampling/createMessage, elicitation/create.
// As SEP-2322 has it, the client gets an input_required result carrying
// the server's request(s) as inputRequests and a requestState, and the
// downstream call stays parked — the server's request waits for its
// answer — until the client makes the call again with inputResponses and
// that requestState; the answers go to the waiting requests and the call
// goes on: the server's next request is another round, its result the
// client's answer.
//
// # The requestState
//
// It is the proxy's own: 32 random bytes (unguessable), naming one round
// of one parked call in a bounded table, and used once: each round gets a
// new one. A retry is taken only if its state is in the table and was
// issued for the retry's actor, server, tool, arguments (as recorded) and
// client, and its inputResponses answer exactly the requests of the round,
// each with a result of the request's kind. Anything else — an unknown,
// expired or used state, another actor's, another call's, a wrong answer —
// is refused with a JSON-RPC error (invalid params), and nothing is
// written or goes downstream; the round stays parked for the right retry.
// The server's own requestState does not exist here (its revision has
// none), and no client's state ever reaches a server.
//
// # What is recorded
//
// Every leg is a call of its own in the log, as the other bridge's legs
// are (DESIGN §2):
//   - the client's first call: its call entry before it goes downstream;
//     the input_required answer, as the client gets it (inputRequests and
//     requestState), is its call.result, durable before the client sees it;
//   - each retry: a call entry naming the call.result it answers
//     (continues) and the hash of its inputResponses
//     (input_responses_sha256), durable before the answers are delivered
//     to the server; its call.result is the next input_required answer or
//     the server's result (or error);
//   - a parked call that ends without its client — the client did not
//     retry within the timeout (the server's waiting requests then get an
//     error), or the server ended the call meanwhile — gets a closing leg:
//     a call entry continuing the last round without input_responses
//     (written before the timeout's error goes to the server) and its
//     call.result with the server's outcome, which nobody receives.
//
// log.Audit checks these chains as it checks any call's legs (the same
// actor, server, tool, arguments and client; each call.result continued
// once). A server's request that cannot be parked — the client did not
// declare the capability, or Options.MaxParkedCalls calls, or its actor's
// share of them (Options.ParkedPerActor), are parked already — gets an
// error at once, and the call goes on to the server's answer to it.
//
// # Parked reads
//
// A 2026-07-28 client's prompts/get or resources/read on such a session
// is parked the same way (parkread.go), through the same table, checks
// (the retry's kind, actor, server, resource or prompt, arguments as
// recorded, and client), cap and timeout. Its legs are read entries, as
// the other bridge's read legs are (readLegs): one prompt.get or
// resource.read entry per leg, written when the leg's outcome comes, a
// later one naming the entry of the leg before (continues) and the hash
// of its inputResponses (input_responses_sha256):
//   - a round's input_required answer is its leg's entry, result_sha256
//     over that answer as the client gets it (less the receipt in its
//     _meta), durable before the client sees it;
//   - a retry's answers go to the server's waiting requests before its
//     leg's entry is written: that entry comes with the leg's outcome
//     (the next round or the server's result), as every read's entry
//     comes after its result (DESIGN §2: one entry per read, written
//     when it is read). A read has no side effect by contract, so there
//     is nothing for an entry before delivery to precede; what the
//     answers were is bound into the leg's entry by their hash, and a
//     leg whose entry cannot be written is withheld from the client.
//     (A call's retry, which may act, is recorded before delivery.)
//   - a parked read nobody answers ends as a call does (its waiting
//     requests get the error); if the server still gives a result, a
//     closing leg continuing the last round, without input_responses,
//     records it. A read that fails has no entry, as anywhere.
//
// roots/list is never parked: the proxy's session declares no roots.

// DefaultMaxParkedCalls and DefaultParkTimeout bound parked calls when
// Options.MaxParkedCalls and Options.ParkTimeout are zero. The timeout is
// a round's: the server's timeout (ServerConfig.Timeout) still bounds
// the whole call, waits for the client included, as it does for a
// stateful client's.
const (
	DefaultMaxParkedCalls = 256
	DefaultParkTimeout    = time.Minute
)

// parkKey holds a parked call's *parkedCall in its downstream context,
// where askClient finds it.
type parkKey struct{}

// A parkedCall is a 2026-07-28 client's call on a 2025-11-25 session,
// going on downstream between the client's legs.
type parkedCall struct {
	p      *Proxy
	in     *callIn     // the first leg's (a call's)
	first  *call       // the first leg, as recorded: who, what, which client (a call's)
	read   *parkedRead // a parked read's own (parkread.go); nil for a call
	meta   mcp.Meta    // the first request's _meta: the client's capabilities
	ctx    context.Context
	cancel context.CancelFunc
	asks   chan *parkedAsk // the server's requests, as it makes them
	done   chan struct{}   // closed when the downstream call is over
	out    call            // what forward made of it
	err    error           // what forward returned

	// Under parking.mu.
	state   string
	pending map[string]*parkedAsk // the round's requests, by inputRequests id
	last    uint64                // the call.result of the round's input_required
	taken   chan struct{}         // closed when a retry took the round (or it ended)
	until   time.Time             // when the round is given up if no retry takes it
	counted bool                  // in parking.live
	nextID  int
}

// A parkedAsk is one request of the server, waiting for its answer.
type parkedAsk struct {
	method string
	params json.RawMessage
	reply  chan parkReply // buffered: the answer never waits
}

type parkReply struct {
	raw json.RawMessage
	err error
}

// parks reports whether call in goes the parked way: a 2026-07-28
// client's call to a server whose session is older, or a retry with a
// requestState of the proxy's.
func (p *Proxy) parks(ctx context.Context, in *callIn) bool {
	if in.protocol < statelessProtocol || p.noPark {
		return false
	}
	if in.params.RequestState != "" && p.parked.has(in.params.RequestState) {
		return true
	}
	cs, err := in.target(ctx)
	return err == nil && !sessionStateless(cs)
}

// serveParked serves one leg of a parked call: the first (which starts
// the call downstream) or a retry (which answers the round it names), and
// returns the leg with the input_required answer or the server's result
// in its result, and its receipt.
func (p *Proxy) serveParked(ctx context.Context, in *callIn, actor string, span *opSpan) (*call, string, *jsonrpc.Error) {
	retry := in.params.RequestState != "" || len(in.params.InputResponses) > 0
	var pc *parkedCall
	var answers map[string]json.RawMessage
	if retry {
		var rerr *jsonrpc.Error
		if pc, answers, rerr = p.takeRetry(in, actor); rerr != nil {
			return nil, "", rerr
		}
		in.continues, in.secrets, in.first = pc.last, pc.first.secrets, pc.first
	}
	c, rerr := p.startCall(ctx, in, actor)
	if rerr != nil {
		if pc != nil {
			p.parked.park(pc, pc.state, pc.pending, pc.last) // not answered: the client may try again
		}
		return nil, "", rerr
	}
	defer c.withdraw()
	span.recorded(c)
	if pc == nil {
		pc = p.startParked(ctx, in, c)
	} else {
		for id, a := range pc.pending {
			a.reply <- parkReply{raw: answers[id]}
		}
		pc.pending = nil
	}
	return p.awaitRound(ctx, pc, c)
}

// takeRetry takes the round a retry answers from the table, with the
// answers for its requests, or refuses the retry (leaving the round).
func (p *Proxy) takeRetry(in *callIn, actor string) (*parkedCall, map[string]json.RawMessage, *jsonrpc.Error) {
	args, _, err := in.d.recordedArgs(actor, in.params.Arguments, in.argsCanon)
	if err != nil {
		return nil, nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the call to %s was not made: its arguments cannot be recorded: %v", in.params.Name, err)
	}
	var answers map[string]json.RawMessage
	pc, rerr := p.parked.take(in.params.RequestState, func(pc *parkedCall) *jsonrpc.Error {
		f := pc.first
		if f == nil || f.actor != actor || f.server != in.d.cfg.ID || !f.sameSent(in, args) || !sameClient(f.client, in.client) {
			return rpcError(jsonrpc.CodeInvalidParams, "provlog: the requestState was not issued for this call (another actor, tool, arguments or client); nothing was forwarded")
		}
		var rerr *jsonrpc.Error
		answers, rerr = answersFor(pc.pending, in.params.InputResponses)
		return rerr
	})
	return pc, answers, rerr
}

// sameSent reports whether in, a retry with args as recorded now, sends
// the tool and arguments leg c sent. With redaction they are compared as
// sent (sentSum): as recorded, they are scrubbed of the server's recent
// redacted values, which other calls change between two legs.
func (c *call) sameSent(in *callIn, args log.CanonicalJSON) bool {
	if c.sent == "" {
		return c.tool == in.tool && string(c.args) == string(args)
	}
	return c.sent == sentSum(in.tool, in.params.Arguments, in.argsCanon)
}

// sentSum is the hash of a call's tool and arguments as sent (raw, or
// canon if the reader made it; recordedArgs read them already).
func sentSum(tool string, raw json.RawMessage, canon []byte) string {
	if canon == nil {
		canon, _ = log.Canonicalize(raw)
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			canon = []byte("{}")
		}
	}
	return hexSHA256(append([]byte(tool+"\x00"), canon...))
}

func sameClient(a, b *mcp.Implementation) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	}
	return truncate(a.Name, maxClientText) == truncate(b.Name, maxClientText) && truncate(a.Version, maxClientText) == truncate(b.Version, maxClientText)
}

// answersFor returns the answers of responses to the requests of a round,
// as the server gets them: one for each request, of its kind, no more.
func answersFor(pending map[string]*parkedAsk, responses mcp.InputResponseMap) (map[string]json.RawMessage, *jsonrpc.Error) {
	if len(responses) != len(pending) {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the retry answers %d input requests; the round asked %d; nothing was forwarded", len(responses), len(pending))
	}
	answers := make(map[string]json.RawMessage, len(pending))
	for id, a := range pending {
		r, ok := responses[id]
		var fits bool
		switch r.(type) {
		case *mcp.ElicitResult:
			fits = a.method == "elicitation/create"
		case *mcp.CreateMessageResult, *mcp.CreateMessageWithToolsResult:
			fits = a.method == "sampling/createMessage"
		case *mcp.ListRootsResult:
			fits = a.method == "roots/list"
		}
		if !ok || !fits {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the retry has no answer of its kind to input request %q (%s); nothing was forwarded", id, a.method)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the answer to input request %q: %v", id, err)
		}
		answers[id] = b
	}
	return answers, nil
}

// startParked starts the call of leg c (the first) downstream, on its own
// context: it outlives the client's request, which an input_required
// answer ends.
func (p *Proxy) startParked(ctx context.Context, in *callIn, c *call) *parkedCall {
	pc := &parkedCall{p: p, in: in, first: c, meta: in.params.Meta, asks: make(chan *parkedAsk), done: make(chan struct{})}
	pc.out = call{server: c.server, tool: c.tool, actor: c.actor, secrets: c.secrets, index: c.index}
	down := *in
	pc.start(ctx, in.d, c.tool, func(ticket uint64, held bool) {
		if held {
			down.ticket = ticket
		}
		pc.err = p.forward(pc.ctx, &down, &pc.out)
	}, func(text string) {
		pc.out.isError, pc.out.errText = true, text
		pc.err = errLocal{text}
	})
	return pc
}

// start runs work, the downstream part of parked call pc on d (what: the
// tool or read, for the log), on a goroutine of its own and a context of
// its own, which the proxy's closing ends; the call is in flight in d's
// gate until work returns, past the front request (work gets the ticket,
// if the gate gave one). A panic in work is the call's error (fail), not
// the sidecar's end: the front's guard does not cover this goroutine.
func (pc *parkedCall) start(ctx context.Context, d *downstream, what string, work func(ticket uint64, held bool), fail func(text string)) {
	p := pc.p
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(p.ctx, cancel) // the proxy closing ends it
	pc.ctx, pc.cancel = context.WithValue(pctx, parkKey{}, pc), cancel
	ticket, held := d.gate.enter()
	go func() {
		defer close(pc.done)
		defer stop()
		defer cancel()
		if held {
			defer d.gate.leave(ticket)
		}
		defer func() {
			if r := recover(); r != nil {
				// A panic's value may be made of what the server or
				// the client sent.
				var secrets *callSecrets
				if pc.first != nil {
					secrets = pc.first.secrets
				}
				p.logger.Error("proxy: panic in a parked call", "server", d.cfg.ID, "tool", what, "panic", d.logText(fmt.Sprint(r), secrets), "stack", string(debug.Stack()))
				fail("internal error while making the call") // the client is told it prefixed "provlog: "
			}
		}()
		if text := p.parked.testingOnlyPanic.Load(); text != nil {
			panic(*text)
		}
		work(ticket, held)
	}()
}

// ask is askClient for a parked call: the server's request waits for the
// client's retry (or an error).
func (pc *parkedCall) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	a := &parkedAsk{method: method, params: b, reply: make(chan parkReply, 1)}
	ended := rpcError(jsonrpc.CodeInternalError, "provlog: the call this %s belongs to has ended", method)
	select {
	case pc.asks <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-pc.ctx.Done():
		return nil, ended
	}
	select {
	case r := <-a.reply:
		return r.raw, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-pc.ctx.Done():
		return nil, ended
	}
}

// next waits for what the server does next in a parked call: a round of
// requests (those it has made at once), or the end of the call (true). A
// client that gives up the request waiting for it cancels the call.
func (pc *parkedCall) next(ctx context.Context) ([]*parkedAsk, bool) {
	select {
	case a := <-pc.asks:
		asks := []*parkedAsk{a}
		for {
			select {
			case a := <-pc.asks:
				asks = append(asks, a)
			default:
				return asks, false
			}
		}
	case <-pc.done:
	case <-ctx.Done():
		pc.cancel()
		<-pc.done
	}
	return nil, true
}

// awaitRound waits, for leg c of parked call pc, for the server's next
// round or its result, and records it as c's outcome: an input_required
// answer parks the call for the client's retry.
func (p *Proxy) awaitRound(ctx context.Context, pc *parkedCall, c *call) (*call, string, *jsonrpc.Error) {
	var receipt string
	over, rerr := p.parkRound(ctx, pc, func(result json.RawMessage) (uint64, *jsonrpc.Error) {
		c.result = result
		c.front, _ = pc.in.d.frontPrepare("tools/call", result, nil) // an object of provlog's making
		var rerr *jsonrpc.Error
		receipt, rerr = p.settle(ctx, pc.in.d, c, nil)
		return c.resultIndex, rerr
	})
	if over {
		receipt, rerr = p.settle(ctx, pc.in.d, c, pc.outcome(c))
		p.parked.ended(pc)
	}
	return c, receipt, rerr
}

// parkRound waits for parked call pc's next round of server requests and
// parks it, under a new requestState, once record has written the leg's
// entry with the round's input_required answer (result) and returned the
// index of the entry a retry continues; over reports that the server
// ended the call instead. A round that cannot be recorded gives the call
// up: its client does not see it.
func (p *Proxy) parkRound(ctx context.Context, pc *parkedCall, record func(result json.RawMessage) (uint64, *jsonrpc.Error)) (over bool, rerr *jsonrpc.Error) {
	for {
		asks, over := pc.next(ctx)
		if over {
			return true, nil
		}
		asks = refuseAsks(asks, func(a *parkedAsk) error {
			if !clientOffers(pc.meta, a.method) {
				return rpcError(jsonrpc.CodeInvalidRequest, "provlog: the client did not declare the capability for %s", a.method)
			}
			return nil
		})
		if len(asks) == 0 {
			continue
		}
		state, full := p.parked.reserve(pc)
		if full != nil {
			refuseAsks(asks, func(*parkedAsk) error { return full })
			continue
		}
		pending := pc.round(asks)
		at, rerr := record(inputRequiredResult(pending, state))
		if rerr != nil {
			pc.cancel()
			go func() { <-pc.done; p.parked.ended(pc) }()
			return false, rerr
		}
		p.parked.park(pc, state, pending, at)
		return false, nil
	}
}

// refuseAsks answers with its error each request why refuses, and returns
// the others.
func refuseAsks(asks []*parkedAsk, why func(*parkedAsk) error) []*parkedAsk {
	kept := asks[:0]
	for _, a := range asks {
		if err := why(a); err != nil {
			a.reply <- parkReply{err: err}
			continue
		}
		kept = append(kept, a)
	}
	return kept
}

// clientOffers reports whether the 2026-07-28 client whose request
// carries meta declared it takes method (its per-request capabilities).
func clientOffers(meta mcp.Meta, method string) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	key := map[string]string{"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}[method]
	return key != "" && caps[key] != nil
}

// round gives the requests of a round their inputRequests ids, unique in
// the call.
func (pc *parkedCall) round(asks []*parkedAsk) map[string]*parkedAsk {
	m := make(map[string]*parkedAsk, len(asks))
	for _, a := range asks {
		pc.nextID++
		m[strconv.Itoa(pc.nextID)] = a
	}
	return m
}

// inputRequiredResult is the input_required answer of a round, as the
// client gets it (and its call.result records it).
func inputRequiredResult(pending map[string]*parkedAsk, state string) json.RawMessage {
	type request struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	reqs := make(map[string]request, len(pending))
	for id, a := range pending {
		reqs[id] = request{a.method, a.params}
	}
	b, _ := json.Marshal(struct {
		ResultType    string             `json:"resultType"`
		InputRequests map[string]request `json:"inputRequests"`
		RequestState  string             `json:"requestState"`
	}{"input_required", reqs, state})
	return b
}

// outcome puts what the server made of the call into leg c, the one that
// ends it, and returns what forward returned.
func (pc *parkedCall) outcome(c *call) error {
	o := &pc.out
	c.result, c.resultCanon, c.front, c.remarshal, c.newSession = o.result, o.resultCanon, o.front, o.remarshal, o.newSession
	c.isError, c.errText, c.errCode = o.isError, o.errText, o.errCode
	return pc.err
}

// watch ends a parked round that its client does not take by until (the
// timeout after it was parked), or whose call the server ends meanwhile,
// with a closing leg.
func (pc *parkedCall) watch(taken chan struct{}, until time.Time, timeout time.Duration) {
	p := pc.p
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	why := fmt.Sprintf("provlog: the client did not answer within %s", timeout)
	select {
	case <-taken:
		return
	case <-pc.done:
		why = ""
	case <-t.C:
	}
	if !p.parked.remove(pc) {
		return // a retry took it meanwhile
	}
	if pc.read != nil {
		pc.read.d.closeParkedRead(pc, why)
		return
	}
	p.closeParked(pc, why)
}

// closeParked records the closing leg of a parked call nobody answers,
// gives the server's waiting requests the error why (none if it ended the
// call itself) and records the server's outcome.
func (p *Proxy) closeParked(pc *parkedCall, why string) {
	in := *pc.in
	params := *in.params
	params.InputResponses, params.RequestState = nil, ""
	in.params, in.continues, in.start, in.first = &params, pc.last, time.Now(), pc.first
	c, rerr := p.startCall(pc.ctx, &in, pc.first.actor)
	if rerr != nil {
		p.logger.Error("proxy: the closing leg of a parked call could not be recorded; the call is cancelled", "actor", pc.first.actor,
			"server", pc.first.server, "tool", pc.first.tool, "call", pc.first.index, "error", rerr.Message)
		pc.cancel()
		<-pc.done
		p.parked.ended(pc)
		return
	}
	defer c.withdraw()
	pc.drain(why)
	if _, rerr := p.settle(pc.ctx, pc.in.d, c, pc.outcome(c)); rerr != nil && c.resultIndex == 0 {
		p.logger.Error("proxy: the outcome of a parked call nobody answers could not be recorded", "call", c.index, "error", rerr.Message)
	}
	p.parked.ended(pc)
}

// drain gives the server's waiting requests of a parked call nobody
// answers, and those it makes until the call is over, the error why (or,
// if why is "", that the call has ended).
func (pc *parkedCall) drain(why string) {
	if why == "" {
		why = "provlog: the call has ended"
	}
	refused := func(*parkedAsk) error { return rpcError(jsonrpc.CodeInternalError, "%s", why) }
	refuseAsks(slices.Collect(maps.Values(pc.pending)), refused)
	pc.pending = nil
	for {
		asks, over := pc.next(pc.ctx)
		if over {
			return
		}
		refuseAsks(asks, refused)
	}
}

// newRequestState is a fresh, unguessable requestState.
func newRequestState() string {
	var b [32]byte
	rand.Read(b[:])
	return "provlog-park-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// maxParked is the cap on parked calls.
func (p *Proxy) maxParked() int {
	if p.opts.MaxParkedCalls > 0 {
		return p.opts.MaxParkedCalls
	}
	return DefaultMaxParkedCalls
}

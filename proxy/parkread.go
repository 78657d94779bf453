package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// Parked reads (park.go's doc comment says what is recorded): a
// 2026-07-28 client's prompts/get or resources/read on a 2025-11-25
// session goes through the parked-call table (parking.go) and park.go's
// state checks, cap and timeout; only the legs' entries differ, read
// entries instead of call legs.

// readSend sends a read downstream: the client's _meta (as it goes down),
// and a SEP-2322 retry's inputResponses and requestState.
type readSend = func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (any, error)

// A parkedRead is what a parked read holds beyond park.go's parkedCall:
// the read as its first leg was recorded, and the server's outcome.
type parkedRead struct {
	d      *downstream
	entry  log.ReadEntry       // the first leg's: kind, actor, server, what, arguments
	sent   string              // with redaction: what it read as sent (readSent), which a retry must send
	client *mcp.Implementation // the client that made it
	raw    json.RawMessage     // the server's result, as received (nil: not captured)
	typed  any                 // the SDK's decoding of it
	err    error               // or the error the read ended with
}

// parksRead reports whether a read of a client of protocol on cs goes the
// parked way: a 2026-07-28 client's, on an older session.
func (d *downstream) parksRead(cs *mcp.ClientSession, protocol string) bool {
	return protocol >= statelessProtocol && !d.p.noPark && !sessionStateless(cs)
}

// parkRead serves one leg of a parked read, as readLegs does a read: the
// first (which starts the read downstream) or a retry (which answers the
// round its requestState names), and returns the leg's outcome, recorded
// as entry: the round's input_required answer or the server's result.
func (d *downstream) parkRead(ctx context.Context, cs *mcp.ClientSession, ss *mcp.ServerSession, client *mcp.Implementation, clientMeta mcp.Meta,
	entry log.ReadEntry, sent string, responses mcp.InputResponseMap, state string, send readSend, bs *blobSet) (readResult, error) {
	var pc *parkedCall
	if state != "" || len(responses) > 0 {
		sum, _, err := d.inputResponsesSum(entry.Actor, responses)
		if err != nil {
			return readResult{}, rpcError(jsonrpc.CodeInvalidParams, "provlog: the %s was not made: its inputResponses cannot be recorded: %v; nothing was forwarded", entry.Kind, err)
		}
		var answers map[string]json.RawMessage
		var rerr *jsonrpc.Error
		if pc, answers, rerr = d.p.takeReadRetry(entry, sent, client, responses, state); rerr != nil {
			return readResult{}, rerr
		}
		// Recorded as the first leg was, whatever the server's recent
		// redacted values are now (the audit holds the legs to one).
		entry.URI, entry.Prompt, entry.Args = pc.read.entry.URI, pc.read.entry.Prompt, pc.read.entry.Args
		entry.Continues, entry.InputResponsesSHA256 = pc.last, sum
		for id, a := range pc.pending {
			a.reply <- parkReply{raw: answers[id]}
		}
		pc.pending = nil
	} else {
		pc = d.startParkedRead(ctx, cs, ss, client, clientMeta, entry, sent, send)
	}
	entry.Time = time.Now()
	return d.awaitReadRound(ctx, pc, entry, bs)
}

// takeReadRetry takes the round a read's retry answers from the table,
// with the answers for its requests, or refuses the retry (leaving the
// round): its state must have been issued for this read (kind, actor,
// server, resource or prompt, arguments as recorded) and client.
func (p *Proxy) takeReadRetry(e log.ReadEntry, sent string, client *mcp.Implementation, responses mcp.InputResponseMap, state string) (*parkedCall, map[string]json.RawMessage, *jsonrpc.Error) {
	var answers map[string]json.RawMessage
	pc, rerr := p.parked.take(state, func(pc *parkedCall) *jsonrpc.Error {
		r := pc.read
		if r == nil || r.entry.Kind != e.Kind || r.entry.Actor != e.Actor || r.entry.Server != e.Server || !r.sameSent(e, sent) || !sameClient(r.client, client) {
			return rpcError(jsonrpc.CodeInvalidParams, "provlog: the requestState was not issued for this %s (another actor, resource, prompt, arguments or client); nothing was forwarded", e.Kind)
		}
		var rerr *jsonrpc.Error
		answers, rerr = answersFor(pc.pending, responses)
		return rerr
	})
	return pc, answers, rerr
}

// startParkedRead starts a read downstream, on a context of its own (it
// outlives the client's request), bounded by the server's timeout, and
// noted as in progress on d so that the server's requests during it find
// the parked read.
func (d *downstream) startParkedRead(ctx context.Context, cs *mcp.ClientSession, ss *mcp.ServerSession, client *mcp.Implementation, clientMeta mcp.Meta,
	entry log.ReadEntry, sent string, send readSend) *parkedCall {
	r := &parkedRead{d: d, entry: entry, sent: sent, client: client}
	pc := &parkedCall{p: d.p, read: r, meta: clientMeta, asks: make(chan *parkedAsk), done: make(chan struct{})}
	meta := downMeta(clientMeta)
	d.p.injectTrace(ctx, meta)
	pc.start(ctx, d, entry.Kind, func(uint64, bool) {
		rctx, cancel := context.WithTimeout(pc.ctx, d.cfg.timeout())
		defer cancel()
		id := d.calls.begin(&inflightCall{session: ss, actor: entry.Actor, ctx: rctx})
		defer d.calls.end(id)
		r.raw, r.typed, r.err = d.sendRead(rctx, entry.Kind, cs, send, meta, nil, "")
	}, func(text string) { r.err = errLocal{text} })
	return pc
}

// awaitReadRound waits, for the leg of parked read pc recorded as e, for
// the server's next round or its result, and records it in e: a round's
// input_required answer, as the client gets it, is in the log before it
// parks the read for the client's retry. The entry takes over the blobs
// in bs (the leg's arguments, held till then).
func (d *downstream) awaitReadRound(ctx context.Context, pc *parkedCall, e log.ReadEntry, bs *blobSet) (readResult, error) {
	p := d.p
	var res readResult
	over, rerr := p.parkRound(ctx, pc, func(result json.RawMessage) (uint64, *jsonrpc.Error) {
		raw, err := readResultAsSent(e.Kind, result)
		if err == nil {
			if res, err = p.recordRead(ctx, &e, raw, nil); err == nil {
				bs.named(d.p, res.receipt.Index) // an entry names them now
				return res.receipt.Index, nil
			}
		}
		return 0, rpcError(jsonrpc.CodeInternalError, "provlog: the %s asked for input that could not be recorded, so it is withheld: %v", e.Kind, err)
	})
	if rerr != nil {
		return readResult{}, rerr
	}
	if !over {
		return res, nil
	}
	p.parked.ended(pc)
	return d.readOutcome(ctx, pc, &e, bs)
}

// readOutcome records the server's outcome of parked read pc as e and
// returns it (a read that failed, or whose result the client cannot be
// given, has no entry, as in readLegs). The entry takes over the blobs in
// bs.
func (d *downstream) readOutcome(ctx context.Context, pc *parkedCall, e *log.ReadEntry, bs *blobSet) (readResult, error) {
	r := pc.read
	if r.err != nil {
		return readResult{}, forwardError(d.cfg.ID, r.err)
	}
	if err := d.frontableRead(e.Kind, r.raw, r.typed, false); err != nil {
		return readResult{}, err
	}
	if _, ok := inputAskOf(r.raw); ok {
		// A 2025-11-25 server has no input_required result to give.
		return readResult{}, rpcError(jsonrpc.CodeInternalError, "provlog: server %q answered the %s with an input_required result on a 2025-11-25 session", d.cfg.ID, e.Kind)
	}
	res, err := d.p.recordRead(ctx, e, r.raw, r.typed)
	if err != nil {
		return readResult{}, rpcError(jsonrpc.CodeInternalError, "provlog: the %s was made but could not be recorded, so its result is withheld: %v", e.Kind, err)
	}
	bs.named(d.p, res.receipt.Index) // an entry names them now
	return res, nil
}

// readResultAsSent is a parked read's input_required answer as the
// client gets it (less the receipt in its _meta): the SDK's front sends
// its result type's encoding.
func readResultAsSent(kind string, result json.RawMessage) (json.RawMessage, error) {
	out := newReadResult(kind)
	if err := json.Unmarshal(result, out); err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// closeParkedRead ends a parked read nobody answers: the server's waiting
// requests get the error why (none if it ended the read itself), and the
// server's outcome, which nobody receives, is a closing leg continuing
// the last round without input_responses, if the server gave a result (a
// read that fails has no entry).
func (d *downstream) closeParkedRead(pc *parkedCall, why string) {
	pc.drain(why)
	d.p.parked.ended(pc)
	e := pc.read.entry
	e.Continues, e.Time = pc.last, time.Now()
	if pc.read.err != nil {
		return
	}
	if _, err := d.readOutcome(context.WithoutCancel(pc.ctx), pc, &e, new(blobSet)); err != nil {
		d.p.logger.Error("proxy: the outcome of a parked read nobody answers could not be recorded", "server", d.cfg.ID, "kind", e.Kind, "error", err)
	}
}

// sameSent reports whether a retry recorded as e, with sent (readSent),
// reads what r did. With redaction it is compared as sent: as recorded,
// its URI, prompt and arguments are scrubbed of the server's recent
// redacted values, which other calls change between two legs.
func (r *parkedRead) sameSent(e log.ReadEntry, sent string) bool {
	if r.sent != "" || sent != "" {
		return r.sent == sent
	}
	return r.entry.URI == e.URI && r.entry.Prompt == e.Prompt && bytes.Equal(r.entry.Args, e.Args)
}

// readSent is, for a server with redaction, the hash of a read as sent:
// a resource's URI, or a prompt's name and arguments (rawArgs, non-nil).
func (d *downstream) readSent(what string, rawArgs json.RawMessage) string {
	if len(d.cfg.Redact) == 0 {
		return ""
	}
	if rawArgs == nil {
		return hexSHA256([]byte(what))
	}
	return sentSum(what, rawArgs, nil)
}

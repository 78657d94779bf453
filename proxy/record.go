package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// Recording a call, in two entries (DESIGN §2): startCall writes the call
// entry before anything reaches the downstream server, settle writes the
// call.result entry before anything goes back to the client. Both fronts
// and both kinds of downstream take these two steps; only the forwarding
// between them differs.

// startCall makes server d's tool call by actor (front is its front
// name; args its arguments as received, argsCanon their canonical form if
// the reader made it already) and writes its call entry. A call whose
// entry cannot be written is refused with the error returned, and must
// not be forwarded. On success the call's result is announced to the log:
// the caller must defer c.withdraw().
func (p *Proxy) startCall(ctx context.Context, in *callIn, actor string) (*call, *jsonrpc.Error) {
	d, front := in.d, in.params.Name
	// The session the call goes to, whose definition it is made against;
	// no session here is forward's error to record.
	cs, _ := in.target(ctx)
	sum, sumErr := d.cat.toolSum(front, cs) // an error refuses the call below, as one its entry cannot be written
	c := &call{
		server: d.cfg.ID, tool: in.tool, toolSum: sum, actor: actor, start: in.start,
		client: in.client, protocol: in.protocol, retain: d.cfg.Retain == RetainFull, continues: in.continues,
	}
	// The _meta's values first: the arguments are recorded without them
	// too (recordedArgs scrubs the actor's recent values).
	meta := d.metaSecrets(actor, in.params.Meta)
	args, secrets, err := d.recordedArgs(actor, in.params.Arguments, in.argsCanon)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the call to %s was not made: its arguments cannot be recorded: %v", front, err)
	}
	c.args = args
	secrets = append(secrets, meta...)
	if len(in.params.InputResponses) > 0 {
		sum, more, err := d.inputResponsesSum(actor, in.params.InputResponses)
		if err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: the call to %s was not made: its inputResponses cannot be recorded: %v", front, err)
		}
		c.inputSum, secrets = sum, append(secrets, more...)
	}
	// The server's name for the tool, as the entry and log lines show
	// it: a server may name a tool after a value its actor sent it, which
	// recordedArgs has just remembered if this call sent it.
	c.tool = d.secretsOf(actor).scrubName(in.tool)
	if f := in.first; f != nil {
		// A later leg sends what the first did (takeRetry), and is
		// recorded as it was, whatever the server's recent values are
		// now: the audit holds a call's legs to one tool and arguments.
		c.args, c.tool, c.sent = f.args, f.tool, f.sent
	} else if len(d.cfg.Redact) > 0 {
		c.sent = sentSum(in.tool, in.params.Arguments, in.argsCanon)
	}
	c.secrets = in.secrets // a later leg's: the legs' before
	if c.continues == 0 && (len(in.params.InputResponses) > 0 || in.params.RequestState != "") {
		c.continues, c.secrets = p.retries.take(c, in.params.RequestState) // a client's own retry
	}
	if c.secrets == nil && len(d.cfg.Redact) > 0 {
		// Only a server with fields to redact has secrets, from the
		// arguments or, later, its client's answers (askClient); a nil
		// set holds none and costs the call path nothing.
		c.secrets = new(callSecrets)
	}
	c.secrets.add(secrets)
	err = sumErr
	if err == nil {
		err = p.recordCall(ctx, c)
	}
	if err != nil {
		p.logger.Error("proxy: recording a call failed; the call is refused", "actor", c.actor, "server", c.server, "tool", c.tool, "error", err)
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: the call to %s was not made, as the log cannot record it: %v", front, err)
	}
	p.announce(c)
	return c, nil
}

// recordedArgs returns the arguments of a call by actor as its entry
// holds them: redacted, scrubbed of the redacted values (the call's own
// and actor's recent ones on the server, scrubJSON), canonical, an empty object for
// absent or null ones; and the redacted values. Arguments JCS cannot
// represent (numbers out of the double range, lone surrogates, duplicate
// keys) are an error, and so are numbers it would represent as another
// number (log.ExactNumbers).
//
// Arguments to redact are checked as the others are before they are
// decoded: encoding/json would read a lone surrogate or a bad byte as
// U+FFFD and keep the last of two equal keys, so the entry would hold
// something other than what the server is sent.
func (d *downstream) recordedArgs(actor string, raw json.RawMessage, canon []byte) (log.CanonicalJSON, []string, error) {
	if canon == nil {
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			return log.CanonicalJSON("{}"), nil, nil
		}
		var err error
		if canon, err = log.Canonicalize(raw); err != nil {
			return nil, nil, err
		}
	}
	if err := log.ExactNumbers(raw); err != nil {
		return nil, nil, err // the entry would hold another number than the server gets
	}
	if len(d.cfg.Redact) == 0 {
		return canon, nil, nil
	}
	v, secrets, err := redactArgs(canon, d.cfg.Redact, d.cfg.RedactIgnoreCase)
	if err != nil {
		return nil, nil, err
	}
	secrets = append(secrets, writtenSecrets(raw, d.cfg.Redact, d.cfg.RedactIgnoreCase)...)
	d.remember(actor, secrets)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, nil, err
	}
	b, err := log.Canonicalize(buf.Bytes())
	if err != nil {
		return nil, nil, err
	}
	// A redacted value sent again under a member the list does not name
	// (a password's confirmation, a note quoting an earlier call's of the
	// same actor: another's would make an oracle, recentSecrets) is
	// cut out there too, as from a result; but not one shorter than
	// minSecretLen, which would have every member holding it withheld
	// ({"count": 17} after a pin of 7): the entry would not say what was
	// sent.
	b, _ = scrubJSON(b, longSecrets(d.secretsOf(actor).with(secrets)))
	return b, secrets, nil
}

// metaSecrets remembers, as actor's, and returns the values of the
// members of a request's _meta that the redact list names: _meta is not recorded, but
// it is forwarded, and the server may echo it.
func (d *downstream) metaSecrets(actor string, meta mcp.Meta) []string {
	if len(d.cfg.Redact) == 0 || len(meta) == 0 {
		return nil
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil
	}
	_, secrets, err := redactArgs(b, d.cfg.Redact, d.cfg.RedactIgnoreCase)
	if err != nil {
		return nil
	}
	d.remember(actor, secrets)
	return secrets
}

// recordCall writes c's call entry, moving the arguments to a blob when
// the entry would be too large, and notes its index in c. A blob written
// for an entry that does not make it into the log is purged again.
func (p *Proxy) recordCall(ctx context.Context, c *call) error {
	e := &log.CallEntry{
		Time: c.start, Actor: c.actor, Auth: log.AuthFrom(ctx), Server: c.server, Tool: c.tool, ToolSHA256: c.toolSum,
		Args: c.args, ProtocolVersion: truncate(c.protocol, maxClientText),
		Continues: c.continues, InputResponsesSHA256: c.inputSum,
	}
	if c.client != nil {
		e.Client = &log.CallClient{Name: truncate(c.client.Name, maxClientText), Version: truncate(c.client.Version, maxClientText)}
	}
	var bs blobSet
	defer bs.done()
	b, err := e.Marshal()
	if errors.Is(err, log.ErrEntryTooLarge) {
		// Move the arguments out to a blob; the entry keeps their hash.
		e.ArgsSHA256, e.Args = hexSHA256(c.args), nil
		if p.opts.Blobs != nil {
			if err := bs.put(p.opts.Blobs, c.args); err != nil {
				return fmt.Errorf("keeping the arguments: %w", err)
			}
		}
		b, err = e.Marshal()
	}
	if err == nil {
		var r *log.Receipt
		r, err = p.append(ctx, nil, log.KindCall, b)
		if err == nil {
			c.index, c.entry = r.Index, b
			bs.named(p, r.Index)
		}
	}
	if err != nil {
		bs.purge(p)
	}
	return err
}

// append appends entry, of kind, as c's announced append if there is one. The
// append outlives the caller's cancellation: an entry on its way is never
// abandoned half-way. It has no deadline of its own: the Recorder answers
// every append it takes (server.Sequencer waits for the commit whatever
// its context says), so a deadline bounded nothing, and cost a timer and
// a context an entry, two a call.
func (p *Proxy) append(ctx context.Context, c *call, kind string, entry []byte) (*log.Receipt, error) {
	actx, end := p.appendSpan(context.WithoutCancel(ctx), kind)
	var r *log.Receipt
	var err error
	if c != nil && c.expected != nil {
		r, err = c.expected.Append(actx, entry)
	} else {
		r, err = p.opts.Log.Append(actx, entry)
	}
	end(r, err)
	return r, err
}

// settle ends call c, which the downstream answered with callErr (nil:
// a result): it records c's outcome and returns its receipt's text form
// and, for a failed call, the error the client gets, carrying the receipt
// as its data unless the downstream's own error has data. If the outcome
// cannot be recorded the receipt is "" and the error says the result is
// withheld.
func (p *Proxy) settle(ctx context.Context, d *downstream, c *call, callErr error) (string, *jsonrpc.Error) {
	c.duration = time.Since(c.start)
	c.dataRelease = p.dataRelease(ctx, d, c.result)
	r, unkept, err := p.recordResult(ctx, d, c)
	if err != nil {
		p.logger.Error("proxy: recording a call's outcome failed; the result is withheld", "actor", c.actor, "server", c.server, "tool", c.tool, "call", c.index, "error", err)
		return "", rpcError(jsonrpc.CodeInternalError, "provlog: the call to server %q's tool %q was made (log entry %d) but its outcome could not be recorded, so its result is withheld: %v", c.server, c.tool, c.index, err)
	}
	if p.logger.Enabled(ctx, slog.LevelDebug) {
		// One line per call, at debug: who called what, and its entries.
		p.logger.LogAttrs(ctx, slog.LevelDebug, "proxy: call recorded", slog.String("actor", c.actor), slog.String("server", c.server),
			slog.String("tool", c.tool), slog.Uint64("call", c.index), slog.Uint64("result", r.Index), slog.Bool("is_error", c.isError),
			slog.Duration("duration", c.duration))
	}
	c.resultIndex = r.Index
	receipt := r.String()
	if unkept != nil {
		p.logger.Error("proxy: a call's result could not be kept; its outcome is recorded and the result withheld", "actor", c.actor, "server", c.server, "tool", c.tool, "call", c.index, "result", r.Index, "error", unkept)
		return receipt, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Data: receiptData(receipt),
			Message: fmt.Sprintf("provlog: the call to server %q's tool %q was answered (log entries %d and %d), but its result could not be kept as the server's retain: full asks, so it is withheld: %v", c.server, c.tool, c.index, r.Index, unkept)}
	}
	if callErr == nil {
		return receipt, nil
	}
	if we, ok := callErr.(*jsonrpc.Error); ok && ctx.Err() == nil {
		out := *we
		if len(out.Data) == 0 {
			out.Data = receiptData(receipt)
		}
		return receipt, boundedError(&out, c, receipt)
	}
	return receipt, boundedError(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: " + c.errText, Data: receiptData(receipt)}, c, receipt)
}

// boundedError is e, the error of c as the client gets it, or, past
// maxFrontResult as encoded (a server's error a few bytes under the bound
// grows past it with the receipt as its data), an error saying so, with
// the receipt as its data.
func boundedError(e *jsonrpc.Error, c *call, receipt string) *jsonrpc.Error {
	if 6*len(e.Message)+len(e.Data) <= maxFrontResult { // a byte of a string is at most 6 in JSON
		return e
	}
	b, _ := json.Marshal(e)
	if len(b) <= maxFrontResult {
		return e
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Data: receiptData(receipt),
		Message: fmt.Sprintf("provlog: server %q: the error of the call to %q is recorded (log entry %d, its receipt in this error's data) but cannot be passed on: with its receipt it is %d bytes, over the %d a client takes in one message (%d MiB, less 1 KiB for the response around it)",
			c.server, c.tool, c.resultIndex, len(b), maxFrontResult, maxEventBytes>>20)}
}

// receiptData is a failed call's error data: its receipt under
// ReceiptKey. Made only for an error: a result carries its receipt in
// its _meta (frontPrep.result), and encoding it here for every call was 1.2
// KB and a map a call.
func receiptData(receipt string) json.RawMessage {
	b := append(make([]byte, 0, len(ReceiptKey)+len(receipt)+len(receipt)/32+16), `{"`+ReceiptKey+`":`...)
	return append(appendJSONString(b, receipt), '}')
}

// recordResult writes c's call.result entry, c a call to d, and returns
// its receipt. A result that retain: full asks to keep but the blob store
// could not is still recorded as answered, its hash in the entry and the
// entry's error saying it was withheld; unkept is then why, and the
// client gets that error with the receipt, not the result.
func (p *Proxy) recordResult(ctx context.Context, d *downstream, c *call) (_ *log.Receipt, unkept, _ error) {
	e := &log.CallResultEntry{
		Time: c.start.Add(c.duration), Actor: c.actor, Auth: log.AuthFrom(ctx), Call: c.index,
		IsError: c.isError, DataRelease: c.dataRelease, Duration: c.duration,
	}
	if c.errText != "" {
		e.Error = truncate(c.errText, maxErrorText)
		e.ErrorCode = c.errCode
	}
	var bs blobSet
	defer bs.done()
	if c.result != nil {
		var canon []byte
		e.ResultSHA256, canon, e.ResultRaw = log.ResultSum(c.result, c.resultCanon)
		e.ResultBytes = int64(len(c.result))
		e.ResultRemarshalled = c.remarshal
		if c.retain {
			// What is kept on disk never holds a redacted value of
			// the actor's: a result that echoes one is kept with it
			// scrubbed out, under its own hash. Not only the call's
			// own: a server may answer one call with what an earlier
			// one had redacted. Another actor's are not looked for:
			// whether they were found would show in the entry
			// (retained_sha256), an oracle (recentSecrets).
			// Nor one of the credentials the server's config gives it.
			kept, changed := scrubJSON(canon, append(d.secretsOf(c.actor).with(c.secrets.all()), d.creds...))
			if unkept = bs.put(p.opts.Blobs, kept); unkept != nil {
				e.Error = truncate(strings.TrimPrefix(e.Error+"; ", "; ")+"provlog withheld the result from the client: it could not be kept: "+unkept.Error(), maxErrorText)
			} else {
				e.ResultRetained = true
				if changed {
					e.RetainedSHA256 = hexSHA256(kept)
				}
			}
		}
	}
	b, err := e.Marshal()
	var r *log.Receipt
	if err == nil {
		r, err = p.append(ctx, c, log.KindCallResult, b)
	}
	if err != nil {
		bs.purge(p)
		return nil, nil, err
	}
	bs.named(p, r.Index)
	return r, unkept, nil
}

// blobSet is the blobs one entry on its way names. Each is held (when
// the store can hold, as *blobs.Store does) from the moment it is looked
// for until the entry is in the log (named) or abandoned (done), so that
// a purge running meanwhile does not delete a blob the entry is about to
// name; those it wrote are purged again if the entry does not make it
// (purge). A hold is its process's: on a shared log another sidecar's
// retention does not see it, so named checks that each blob is still
// there once the entry is in, and stores it again if not (purge.go's
// purge restores those an entry after its purge entry names, for an
// entry that was in before the check).
type blobSet struct {
	wrote   []string
	release []func()
	held    []heldBlob
}

// heldBlob is a blob a blobSet holds: its name and its bytes, to store
// again if another sidecar's purge deletes it (named).
type heldBlob struct {
	sum  string
	data []byte
}

// A blobHaver says whether it holds a blob, without reading it, as
// *blobs.Store does.
type blobHaver interface {
	Has(sum string) (bool, error)
}

// A blobHolder holds a blob against a purge until release is called.
type blobHolder interface {
	Hold(sum string) (release func())
}

func (s *blobSet) put(store BlobStore, b []byte) error {
	sum := hexSHA256(b)
	release := func() {}
	if h, ok := store.(blobHolder); ok {
		release = h.Hold(sum)
	}
	if _, err := store.Get(sum); err == nil {
		s.release, s.held = append(s.release, release), append(s.held, heldBlob{sum, b})
		return nil // already there: not ours to purge
	}
	if _, err := store.Put(b); err != nil {
		release()
		return err
	}
	s.wrote = append(s.wrote, sum)
	s.release, s.held = append(s.release, release), append(s.held, heldBlob{sum, b})
	return nil
}

// named ends the holds of entry, now in the log, first storing again
// any blob it names that a purge through another sidecar deleted
// meanwhile, unless that purge's entry is newer than entry
// (Options.BlobNamed): an entry newer than the purge's keeps the blob,
// an older one does not.
func (s *blobSet) named(p *Proxy, entry uint64) {
	if sh, ok := p.opts.Blobs.(blobSharer); !ok || !sh.Shared() {
		s.done() // no other process deletes this store's blobs
		return
	}
	for _, hb := range s.held {
		sum, b := hb.sum, hb.data
		if h, ok := p.opts.Blobs.(blobHaver); ok {
			if there, err := h.Has(sum); there || err != nil {
				continue // there, or the store cannot say: a Put would fail too
			}
		} else if _, err := p.opts.Blobs.Get(sum); err == nil {
			continue
		}
		if p.opts.BlobNamed != nil {
			if still, err := p.opts.BlobNamed(context.Background(), sum, entry); err != nil {
				p.logger.Error("proxy: a blob an entry names was purged meanwhile, and whether a purge entry newer than the entry names it could not be read; stored again (provlog audit names it if the purge is to be run again)", "blob", sum, "entry", entry, "error", err)
			} else if !still {
				continue // a purge after the entry deleted it: its entry says so
			}
		}
		if _, err := p.opts.Blobs.Put(b); err != nil {
			p.logger.Error("proxy: a blob an entry names was purged meanwhile, and storing it again failed", "blob", sum, "error", err)
		} else {
			p.logger.Warn("proxy: a blob an entry names was purged meanwhile (by another sidecar of the log); stored again", "blob", sum)
		}
	}
	s.done()
}

// done ends the holds: the entry is in the log, or will not be.
func (s *blobSet) done() {
	for _, r := range s.release {
		r()
	}
	*s = blobSet{}
}

// A blobDoomer marks blobs for deletion that no hold holds (Doom), as
// *blobs.Store does, and ends the marks (Undoom).
type blobDoomer interface {
	Doom(names []string) []string
	Undoom(names []string)
}

// A blobSharer says whether other processes write and delete its blobs
// too, as *blobs.Store over a shared log's table does.
type blobSharer interface {
	Shared() bool
}

// purge deletes the blobs s wrote, for an entry that did not make it into
// the log, and ends the holds. Another call may have found one there
// since and hold it, its entry on its way or in the log: with a store
// that holds, only the blobs no other hold holds are deleted (Doom), the
// others left to the entries naming them. On a store other sidecars
// share, whose calls' holds are not seen here, nothing is deleted: a blob
// no entry names costs room, one deleted under another's entry is gone.
func (s *blobSet) purge(p *Proxy) {
	wrote := s.wrote
	s.done()
	if sh, ok := p.opts.Blobs.(blobSharer); ok && sh.Shared() {
		return
	}
	if d, ok := p.opts.Blobs.(blobDoomer); ok {
		wrote = d.Doom(wrote)
		defer d.Undoom(wrote)
	}
	for _, sum := range wrote {
		if err := p.opts.Blobs.Purge(sum); err != nil {
			p.logger.Error("proxy: purging the blob of an unrecorded entry", "blob", sum, "error", err)
		}
	}
}

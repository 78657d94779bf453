package proxy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// What the agent was offered and what it read (DESIGN §2): a server's tool
// list goes into a tools entry when it is first read and whenever it
// changes, and a call names the definition it was made against
// (tool_sha256); resources/read and prompts/get through the proxy are
// resource.read and prompt.get entries, with their receipt in the result's
// _meta like a call's.

// proxyActor is the actor of the entries the proxy writes on its own
// account (tools lists).
const proxyActor = log.GenesisActor

// maxToolChanges bounds the definition changes a server's status keeps.
const maxToolChanges = 100

// maxKnownTools bounds the tool names whose last definition a catalogue
// remembers after the server stopped listing them; past it, it forgets
// those.
const maxKnownTools = 100_000

// A ToolChange is a tool definition that changed while the proxy ran: a
// server may change what a tool does under an agent that already chose
// to call it.
type ToolChange struct {
	Tool string    `json:"tool"` // the server's name for it
	Old  string    `json:"old_sha256"`
	New  string    `json:"new_sha256"`
	At   time.Time `json:"at"`
}

// definitionSum is the hex SHA-256 of the JCS form of a definition as the
// server listed it (of its bytes, if JCS refuses them): what
// call.tool_sha256 names. Not [log.ResultSum]: a tools entry carries no
// marker of the form hashed, so a definition holding a number JCS writes
// as another (a schema's "maximum": 18446744073709551615) keeps the hash
// every earlier log and replay gave it.
func definitionSum(raw json.RawMessage) string {
	canon, err := log.Canonicalize(raw)
	if err != nil {
		canon = raw
	}
	return hexSHA256(canon)
}

// hexSHA256 is the hex SHA-256 of b: how entries name result bytes and
// blobs.
func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// toolSum returns the hash of the definition of front tool name front, or
// "" if it is not (or no longer) registered. A change of the tools the
// server announced is read first (the server has the new definitions
// already; at most listBound, see awaitRead), and the tools entry holding the
// definition is waited for (recordTools), so that a call entry citing a
// definition comes after the entry that holds it; if that entry was
// refused it is written again, and the error is why it could not be (the
// call is then not made).
//
// A call that goes to the server's newer session (cs) names the
// definition that session listed ("" if it lists no such tool).
func (c *catalogue) toolSum(front string, cs *mcp.ClientSession) (string, error) {
	c.mu.Lock()
	newer := cs != nil && cs == c.newer.cs && c.newer.sums != nil
	slot := listSlot(toolSlot)
	if newer {
		slot = newerToolSlot
	}
	if n := c.asked[slot].Load(); c.read[slot] < n {
		// Rarely: a change announced and not read yet.
		c.mu.Unlock()
		c.awaitRead(slot, n)
		c.mu.Lock()
	}
	// The entry of a definition registered is begun before it is
	// registered (sync), so rec is that entry's or a later one's.
	r, rec := c.lists[toolSlot].reg[front], c.recording
	sum := r.sum
	switch {
	case newer:
		sum = c.newer.sums[r.name]
	case r.newerOnly:
		sum = "" // the first session does not list it
	}
	c.mu.Unlock()
	if rec == nil {
		return sum, nil
	}
	<-rec.done // the append answers once its entry is committed or refused
	if rec.err == nil {
		return sum, nil
	}
	// The entry was refused (a store unavailable for a moment): the call
	// would name a definition no entry holds. It is written again, after
	// whatever was begun since, and the call made only once it is in.
	if rec = c.rewrite(rec); rec.err != nil {
		return "", rec.err
	}
	return sum, nil
}

// A toolsWrite is the writing of one tools entry.
type toolsWrite struct {
	e    *log.ToolsEntry
	done chan struct{} // closed once the entry is durable or refused
	err  error         // why it was refused (set before done is closed)
}

// rewrite writes failed's entry again, unless an entry begun since has
// been or is being written (which holds the newer list), and returns that
// writing, done.
func (c *catalogue) rewrite(failed *toolsWrite) *toolsWrite {
	c.mu.Lock()
	w := c.recording
	if w == failed {
		w = c.beginTools(failed.e)
	}
	c.mu.Unlock()
	<-w.done
	return w
}

// beginTools begins writing e after every entry begun before it, and
// makes it the one begun last. The caller holds c.mu.
func (c *catalogue) beginTools(e *log.ToolsEntry) *toolsWrite {
	d := c.d
	w := &toolsWrite{e: e, done: make(chan struct{})}
	earlier := c.recording
	c.recording = w
	go func() {
		defer close(w.done)
		if earlier != nil {
			<-earlier.done // in order
		}
		// A list too large for one entry goes in several, in order.
		parts, err := e.MarshalParts()
		for _, b := range parts {
			if _, err = d.p.append(context.Background(), nil, log.KindTools, b); err != nil {
				break
			}
		}
		if err != nil {
			d.p.logger.Error("proxy: recording a server's tool list failed; its tools' calls write it again first", "server", d.cfg.ID, "tools", len(e.Tools), "error", err)
			w.err = fmt.Errorf("recording server %q's tool list: %w", d.cfg.ID, err)
		}
	}()
	return w
}

// awaitRead waits until a read of the list in slot covers the server's
// first n changes of it, as a front list waits for a fresh read: at most
// listBound, and not at all while the server is behind on the list (a
// list or a call gave up waiting for it, and no read has answered since).
// A call that gives up names the definition read last, and the server
// is then behind: a server that announces a change and hangs its list
// costs its calls one wait, not one each, and not the read's own bound.
func (c *catalogue) awaitRead(slot listSlot, n uint64) {
	c.mu.Lock()
	behind := c.behind&(1<<slot) != 0
	c.mu.Unlock()
	if behind {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.listBound())
	defer cancel()
	if !c.await(func() bool { return c.read[slot] >= n }, ctx.Done()) {
		c.mu.Lock()
		under := c.ended[slot] + 1 // the read under way, or the next
		c.mu.Unlock()
		c.late(slot, under)
	}
}

// readTo notes that a read of the list in slot (begin), applied or
// failed, has ended, and covers the server's first n changes of it; the
// server answered it if answered.
func (c *catalogue) readTo(slot listSlot, n uint64, answered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read[slot] = max(c.read[slot], n)
	c.ended[slot] = c.begun[slot] // one read at a time (readMu)
	if answered {
		c.behind &^= 1 << slot
	}
	close(c.readNow)
	c.readNow = make(chan struct{})
}

// The sessions whose tool lists a catalogue records: the server's first,
// and its newer (newertools.go).
const (
	firstSessionTools = iota
	newerSessionTools
)

// recordTools writes the tool list of the server's session (raws, as
// listed) into a tools entry if it is the first list read since the
// proxy started or differs from the session's last, and reports
// definitions that changed. Each session is compared with itself (its
// first list with the first session's): compared with the other's, a
// session whose list differs from the other's had a change recorded
// and reported each time the two were read, back and forth. A changed
// list's entry is written while the list is registered at the front, so
// that the front's clients hear of the change without waiting for the
// log; a call's tool_sha256 waits for it instead (toolSum). The first
// list's entry is written before recordTools returns. One entry is written
// at a time, in the order the lists were read.
func (c *catalogue) recordTools(session int, raws []json.RawMessage) {
	d := c.d
	sums := toolSums(raws)
	c.mu.Lock()
	prev, known := c.listed[session], c.known[session]
	if prev == nil {
		prev, known = c.listed[firstSessionTools], c.known[firstSessionTools]
	}
	if prev != nil && maps.Equal(prev, sums) {
		c.noteListed(session, known, sums)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	now := time.Now()
	var changed []ToolChange
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		// Against the last definition listed under the name, in this list
		// or before: a tool removed and listed again with another
		// definition has changed too.
		if old, ok := known[name]; ok && old != sums[name] {
			shown := d.secrets.scrubName(name)
			changed = append(changed, ToolChange{Tool: shown, Old: old, New: sums[name], At: now})
			d.p.logger.Warn("proxy: a tool's definition changed while the proxy runs", "server", d.cfg.ID, "tool", shown, "old_sha256", old, "new_sha256", sums[name])
		}
	}
	// Names as the server gave them, but for a value a client sent it
	// that it named a tool after (recentSecrets); sorted as shown.
	e := &log.ToolsEntry{Time: now, Actor: proxyActor, Server: d.cfg.ID}
	for name, sum := range sums {
		e.Tools = append(e.Tools, log.ToolSum{Name: d.secrets.scrubName(name), SHA256: sum})
	}
	slices.SortFunc(e.Tools, func(a, b log.ToolSum) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.SHA256, b.SHA256))
	})
	c.mu.Lock()
	c.noteListed(session, known, sums)
	c.changes = append(c.changes, changed...)
	if n := len(c.changes); n > maxToolChanges {
		c.changes = c.changes[n-maxToolChanges:]
	}
	w := c.beginTools(e)
	c.mu.Unlock()
	if prev == nil {
		// The first list since the proxy started is in the log before the
		// server counts as up: a sidecar that is ready has every server's
		// tools entry (or its calls write it first), and the entries that
		// follow come after it.
		<-w.done
	}
}

// noteListed makes sums the last list of session recorded, and its
// definitions the last known of their names; known is what the session
// was compared with. The caller holds c.mu.
func (c *catalogue) noteListed(session int, known, sums map[string]string) {
	c.listed[session] = sums
	k := c.known[session]
	if k == nil {
		k = maps.Clone(known) // its first list: the first session's names
	}
	if k == nil || len(k)+len(sums) > maxKnownTools {
		k = make(map[string]string, len(sums))
	}
	maps.Copy(k, sums)
	c.known[session] = k
}

// fitRead makes sure read entry e fits in the log whatever its result and
// legs add (the hash, size and form of the result, continues and the hash
// of the answers), before the read is forwarded: prompt arguments too large
// for it go to a blob, the entry keeping their hash (args_sha256), as a
// call's do; anything else too large (a URI of tens of kilobytes) is an
// error. It returns the blobs it wrote.
func (p *Proxy) fitRead(ctx context.Context, e *log.ReadEntry) (blobSet, error) {
	probe := *e
	probe.Time, probe.Auth = time.Now(), log.AuthFrom(ctx)
	probe.ResultSHA256, probe.ResultBytes = strings.Repeat("0", sha256.Size*2), math.MaxInt64
	probe.ResultRaw, probe.ResultRemarshalled = true, true
	probe.Continues, probe.InputResponsesSHA256 = math.MaxInt64, probe.ResultSHA256
	_, err := probe.Marshal()
	if !errors.Is(err, log.ErrEntryTooLarge) || e.Args == nil {
		return blobSet{}, err
	}
	var bs blobSet
	if p.opts.Blobs != nil {
		if err := bs.put(p.opts.Blobs, e.Args); err != nil {
			return blobSet{}, fmt.Errorf("keeping the arguments: %w", err)
		}
	}
	probe.ArgsSHA256, probe.Args = hexSHA256(e.Args), nil
	if _, err := probe.Marshal(); err != nil {
		bs.purge(p)
		return blobSet{}, err
	}
	e.ArgsSHA256, e.Args = probe.ArgsSHA256, nil
	return bs, nil
}

// toolSums returns the definition hash of each tool in raws by name.
func toolSums(raws []json.RawMessage) map[string]string {
	sums := map[string]string{}
	for _, raw := range raws {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name != "" {
			sums[t.Name] = definitionSum(raw)
		}
	}
	return sums
}

// A readResult is a read's result as recorded: as received (the SDK's
// re-encoding when it was not captured), with its canonical form, which
// its entry hashed, if it has one, and its receipt.
type readResult struct {
	raw     json.RawMessage
	canon   []byte
	receipt *log.Receipt
}

// recordRead writes a resource.read or prompt.get entry for a result
// received as raw (the SDK's re-encoding of typed when raw was not
// captured, which the entry then says) and returns it as recorded.
func (p *Proxy) recordRead(ctx context.Context, e *log.ReadEntry, raw json.RawMessage, typed any) (readResult, error) {
	if raw == nil {
		var err error
		if raw, err = json.Marshal(typed); err != nil {
			return readResult{}, err
		}
		e.ResultRemarshalled = true
	}
	var hashed []byte
	e.ResultSHA256, hashed, e.ResultRaw = log.ResultSum(raw, nil)
	r := readResult{raw: raw}
	if !e.ResultRaw {
		r.canon = hashed // what the client gets is prepared from it (frontReadAs)
	}
	e.ResultBytes = int64(len(raw))
	e.Auth = log.AuthFrom(ctx)
	b, err := e.Marshal()
	if err != nil {
		return readResult{}, err
	}
	if r.receipt, err = p.append(ctx, nil, e.Kind, b); err != nil {
		return readResult{}, fmt.Errorf("recording the %s: %w", e.Kind, err)
	}
	return r, nil
}

// Results as the client gets them: the server's bytes with the receipt in
// their _meta and, when the server has a URI prefix, its URIs given their
// front form, so the client can read them through the proxy. tools/call,
// prompts/get and resources/read results alike go through frontPrepare
// and frontPrep.result (frontresult.go), which use the helpers below.
// The entries hash the result as the server sent it.

// withReceipt puts receipt into result m's _meta, keeping what the
// server put there.
func withReceipt(m map[string]json.RawMessage, receipt string) error {
	meta := map[string]json.RawMessage{}
	if old := m["_meta"]; old != nil {
		if err := json.Unmarshal(old, &meta); err != nil || meta == nil {
			return fmt.Errorf("the result's _meta is not an object")
		}
	}
	meta[ReceiptKey], _ = json.Marshal(receipt)
	m["_meta"], _ = json.Marshal(meta)
	return nil
}

// frontBlock gives one content block its front URI, if it has one.
func frontBlock(up string, b map[string]json.RawMessage) {
	var typ string
	json.Unmarshal(b["type"], &typ)
	switch typ {
	case "resource_link":
		b["uri"] = prefixURI(up, b["uri"])
	case "resource":
		var res map[string]json.RawMessage
		if json.Unmarshal(b["resource"], &res) == nil && res != nil {
			res["uri"] = prefixURI(up, res["uri"])
			b["resource"], _ = json.Marshal(res)
		}
	}
}

// prefixURI returns the JSON string uri with prefix up, or uri as it is
// if it is not a non-empty string.
func prefixURI(up string, uri json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(uri, &s) != nil || s == "" {
		return uri
	}
	b, _ := json.Marshal(up + s)
	return b
}

// frontableRead returns the error the client gets for the result of a
// read of kind, before the read is recorded, if it cannot be given to the
// client: raw as received (nil: not captured, the SDK's re-encoding of typed is
// passed on), typed the SDK's decoding of it, asking whether the client
// gets it as an input_required result (frontAsking). Such a read failed,
// as one the server answered with an error does, and likewise has no
// entry: a read entry says what was read, and has no is_error to say
// otherwise. The SDK's decoding refuses most such results (no object, no
// result, contents or messages that are no array, a _meta of another type)
// before anything is recorded; what it takes and the client cannot be
// given is null or a null _meta (frontPrepare refuses them), resource
// contents or prompt messages that are null or hold null, or none in a
// result the client does not get as input_required (go-sdk's front refuses
// no contents, and it or the proxy's URI rewriting crashes on null ones;
// the TypeScript SDK's client refuses messages that are none or hold
// null), and what was read (contents, messages) beside inputRequests,
// which go-sdk's front refuses as a server's bug
// (handleMultiRoundTripResult: an input_required result has nothing read),
// and an input request that is null, on whose decoding go-sdk panics
// (sendRead).
// The usual result, with no _meta (nor an escape that could spell one),
// costs a scan.
func (d *downstream) frontableRead(kind string, raw json.RawMessage, typed any, asking bool) error {
	var err error
	t := bytes.TrimLeft(raw, " \t\r\n")
	if raw != nil && (len(t) == 0 || t[0] != '{' || bytes.Contains(t, []byte(`"_meta"`)) || bytes.Contains(t, []byte(`\u`))) {
		_, err = resultMembers(readMethod(kind), raw)
	}
	if err == nil {
		switch r := typed.(type) {
		case *mcp.ReadResourceResult:
			err = readShape("contents", r.Contents, r.InputRequests, asking)
		case *mcp.GetPromptResult:
			err = readShape("messages", r.Messages, r.InputRequests, asking)
		}
	}
	if err != nil {
		return d.notPassedOn(err)
	}
	return nil
}

// readShape returns what is wrong, if anything, with a read's result as
// go-sdk decoded it: what was read (items, the result's member what) and
// its input requests (asks), asking whether the client gets it as an
// input_required result (frontableRead).
func readShape[T any](what string, items []*T, asks mcp.InputRequestMap, asking bool) error {
	switch {
	case asks != nil && len(items) > 0:
		return fmt.Errorf("the result has both %s and inputRequests", what)
	case nullAsk(asks):
		return errNullAsk
	case slices.Contains(items, nil):
		return fmt.Errorf("the result's %s is not an array of objects", what)
	case items == nil && !asking:
		return fmt.Errorf("the result has no %s", what)
	}
	return nil
}

// notPassedOn is the error the client gets for a read whose result it
// cannot be given, err saying what was wrong with it.
func (d *downstream) notPassedOn(err error) error {
	return rpcError(jsonrpc.CodeInternalError, "provlog: server %q: its result cannot be passed on: %v", d.cfg.ID, err)
}

// errNullAsk is what is wrong with a result whose inputRequests holds
// null, which go-sdk's decoding panics on (sendRead).
var errNullAsk = errors.New("the result's inputRequests holds null, not an input request")

// nullAsk reports whether asks holds a null input request (readView).
func nullAsk(asks mcp.InputRequestMap) bool {
	for _, a := range asks {
		if a == nil {
			return true
		}
	}
	return false
}

// sendRead sends a read (send, with the client's _meta as it goes down
// and a retry's inputResponses and requestState) through go-sdk's client,
// and returns its result as received (raw; nil if not captured) and
// go-sdk's decoding of it (typed), or the error the read failed with. A
// result go-sdk's types do not hold (a number beyond a double, 1e999; one
// nested deeper than its decoder reads, which stdioConn and the HTTP tees
// read for the capture) or whose decoding panics (an input request that is null) is
// the read's result as received, as a tools/call's is (sdkCall): typed is
// then readView's decoding of it, for frontableRead to judge; one the
// proxy cannot read (nested past encoding/json's bound) fails the read,
// saying so. kind is the read's entry kind.
func (d *downstream) sendRead(ctx context.Context, kind string, cs *mcp.ClientSession, send readSend, meta mcp.Meta, responses mcp.InputResponseMap, state string) (json.RawMessage, any, error) {
	cp := &capture{}
	defer cp.done()
	typed, err := sdkDecoded(func() (any, error) { return send(withCapture(ctx, cp), cs, meta, responses, state) })
	raw := cp.last()
	switch {
	case err == nil:
		return raw, typed, nil
	case cp.unreadable() != nil:
		return nil, nil, fmt.Errorf("the answer is not a JSON-RPC message the proxy can read: %w", cp.unreadable())
	case raw != nil && cp.remoteError() == nil && ctx.Err() == nil:
		typed = newReadResult(kind)
		if err := readView(raw, typed); err != nil {
			return nil, nil, d.notPassedOn(err)
		}
		return raw, typed, nil
	}
	return nil, nil, cp.answerError(err)
}

// readMethod is the method of a read of kind.
func readMethod(kind string) string {
	if kind == log.KindPromptGet {
		return "prompts/get"
	}
	return "resources/read"
}

// newReadResult is a new result of go-sdk's type for a read of kind.
func newReadResult(kind string) any {
	if kind == log.KindPromptGet {
		return new(mcp.GetPromptResult)
	}
	return new(mcp.ReadResourceResult)
}

// viewDepth is the nesting past which readView reads a value as null.
const viewDepth = 100

// readView decodes raw, a read's result that go-sdk's types do not hold
// as it is (sendRead), into out, of go-sdk's type: a view of it for
// what judges it (frontableRead, frontAsking) and for the SDK's front,
// which sends the result's own bytes (rawReads). Numbers beyond a double
// are read as 0 and values nested past viewDepth as null, neither of
// which those judge; an input request that is null is a nil entry of
// InputRequests, which frontableRead refuses.
func readView(raw json.RawMessage, out any) (err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	var nulls []string
	if m, ok := v.(map[string]any); ok {
		asks, _ := m["inputRequests"].(map[string]any)
		for k, a := range asks {
			if a == nil {
				nulls = append(nulls, k)
				delete(asks, k)
			}
		}
	}
	b, err := json.Marshal(viewOf(v, 0))
	if err == nil {
		_, err = sdkDecoded(func() (any, error) { return nil, json.Unmarshal(b, out) })
	}
	var asks *mcp.InputRequestMap
	switch r := out.(type) {
	case *mcp.ReadResourceResult:
		asks = &r.InputRequests
	case *mcp.GetPromptResult:
		asks = &r.InputRequests
	}
	if err != nil || len(nulls) == 0 || asks == nil {
		return err
	}
	if *asks == nil {
		*asks = mcp.InputRequestMap{}
	}
	for _, k := range nulls {
		(*asks)[k] = nil
	}
	return nil
}

// viewOf is v, decoded with numbers as json.Number, at depth, as
// readView reads it.
func viewOf(v any, depth int) any {
	if depth > viewDepth {
		return nil
	}
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return json.Number("0")
		}
	case map[string]any:
		for k, e := range x {
			x[k] = viewOf(e, depth+1)
		}
	case []any:
		for i, e := range x {
			x[i] = viewOf(e, depth+1)
		}
	}
	return v
}

// frontAsking reports whether go-sdk's front gives a client of protocol
// the read result typed (the SDK's decoding of the server's) as an
// input_required result, which may have no contents: from 2026-07-28 on,
// one that holds inputRequests, whatever its resultType
// (handleMultiRoundTripResult sets it so); before, one the server said
// is.
func frontAsking(typed any, protocol string) bool {
	var asks mcp.InputRequestMap
	var needs bool
	switch r := typed.(type) {
	case *mcp.ReadResourceResult:
		asks, needs = r.InputRequests, r.NeedsInput()
	case *mcp.GetPromptResult:
		asks, needs = r.InputRequests, r.NeedsInput()
	}
	if protocol >= statelessProtocol {
		return asks != nil
	}
	return needs
}

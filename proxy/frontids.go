package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The ids of a front session's requests in progress.
//
// A front session's requests go two ways: a plain tools/call on the
// front's fast path (httpfront.go, stdiofront.go), everything else
// through the SDK's server, which keeps the ids of its own requests in
// progress and refuses a request under one of them. Each path knew only
// its own: a call on one under the id of a request in progress on the
// other was made and recorded, and the client had two answers under one
// id. So both paths claim a request's id in one set (frontIDs) before it
// is served, and a request under an id held is refused, as the SDK
// refuses one: neither recorded nor made. The SDK's path claims an id
// before the SDK sees the request and frees it before its answer goes
// out, as the SDK frees its own: on stdio where the SDK's connection reads
// and writes (idConn); on HTTP when the POST is handed to the SDK
// (holdIDs), freed when the SDK's handler of the request returns (guard)
// or, for a request no handler took (one the SDK refused, or of a batch),
// when the POST ends. The ids of the client's answers to the server's
// requests are another space, and a notification has none.

// A frontIDs holds the ids (callKey) of a front session's requests in
// progress.
type frontIDs struct {
	m sync.Map // callKey -> context.CancelFunc (a fast-path call) or *sdkRequest
}

// An sdkRequest holds an id for a request the SDK serves.
type sdkRequest struct {
	taken atomic.Bool // its freeing was taken up (by its handler, or the POST's end)
}

// claim holds key for v, a fast-path call's cancel or an *sdkRequest, and
// reports whether it was free.
func (ids *frontIDs) claim(key string, v any) bool {
	_, held := ids.m.LoadOrStore(key, v)
	return !held
}

// free frees a fast-path call's key.
func (ids *frontIDs) free(key string) { ids.m.Delete(key) }

// freeSDK frees key if r holds it.
func (ids *frontIDs) freeSDK(key string, r *sdkRequest) { ids.m.CompareAndDelete(key, r) }

// cancel cancels the fast-path call under key and reports whether there
// is one; a request the SDK serves is the SDK's to cancel.
func (ids *frontIDs) cancel(key string) bool {
	v, _ := ids.m.Load(key)
	cancel, ok := v.(context.CancelFunc)
	if ok {
		cancel()
	}
	return ok
}

// duplicateID is the refusal of a request under id, an id in progress,
// in go-sdk's words: the id as it reads it (a string unquoted, 7.0 as 7).
func duplicateID(id json.RawMessage) *jsonrpc.Error {
	shown := string(bytes.TrimSpace(id))
	if rid, ok := answerID(id); ok {
		shown = fmt.Sprint(rid.Raw())
	}
	return rpcError(jsonrpc.CodeInvalidRequest, "duplicate in-flight request ID %s", truncate(shown, 64))
}

// refuseDuplicate answers a POST whose request, under id, was refused as
// a duplicate, as the SDK's handler answers it whether it would have
// answered with JSON or an event stream: 400, the error under that id, in
// JSON. Both paths refuse with it (holdIDs, serveFastCall), before
// anything else of the POST's answer is written.
func (p *Proxy) refuseDuplicate(w http.ResponseWriter, id json.RawMessage) {
	writeRPCStatus(w, http.StatusBadRequest, id, nil, duplicateID(id), p.answerTimeout())
}

// sdkKey is the callKey of an id as the SDK decoded it.
func sdkKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return `"` + v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// frontHeldHeader hands the key of a POST's one request to the SDK's
// handler of it (guard: heldBy), which frees it.
const frontHeldHeader = "Provlog-Internal-Held-Id"

// A heldID is an id a POST handed to the SDK holds.
type heldID struct {
	key string
	r   *sdkRequest
}

// holdIDs claims the ids of the requests of pb, a POST to fs the SDK
// serves, and reports true; or, if one is held, frees what it claimed,
// refuses the POST as the SDK refuses it (400, the error under that id)
// and reports false. The POST's end frees what is returned (releaseIDs).
func (p *Proxy) holdIDs(w http.ResponseWriter, r *http.Request, fs *frontSession, pb postBody) ([]heldID, bool) {
	r.Header.Del(frontHeldHeader)
	ids := requestIDs(pb)
	held := make([]heldID, 0, len(ids))
	for _, id := range ids {
		h := heldID{callKey(id), new(sdkRequest)}
		if !fs.ids.claim(h.key, h.r) {
			fs.releaseIDs(held)
			p.refuseDuplicate(w, id)
			return nil, false
		}
		held = append(held, h)
	}
	if len(held) == 1 && (len(pb.raw) == 0 || bytes.TrimLeft(pb.raw, " \t\r\n")[0] != '[') {
		r.Header.Set(frontHeldHeader, held[0].key)
	}
	return held, true
}

// release frees the ids of held no handler took.
func (fs *frontSession) releaseIDs(held []heldID) {
	for _, h := range held {
		if h.r.taken.CompareAndSwap(false, true) {
			fs.ids.freeSDK(h.key, h.r)
		}
	}
}

// requestIDs are the ids of the requests of pb (not of answers or
// notifications), as the SDK reads them.
func requestIDs(pb postBody) []json.RawMessage {
	if pb.parsed {
		if pb.msg.method == "" || pb.msg.id == nil {
			return nil
		}
		return []json.RawMessage{pb.msg.id}
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []message
	if t := bytes.TrimLeft(pb.raw, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		sdkDecode(t, &msgs)
	} else if len(t) > 0 {
		var m message
		sdkDecode(t, &m)
		msgs = append(msgs, m)
	}
	var ids []json.RawMessage
	for _, m := range msgs {
		if m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// heldBy takes up freeing the id an HTTP request the SDK's handler
// serves holds (holdIDs), and returns what frees it once the handler
// returned, before the SDK's answer goes out.
func (p *Proxy) heldBy(req mcp.Request) func() {
	ex := req.GetExtra()
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ex == nil || ex.Header == nil || ss == nil || ex.Header.Get(frontHeldHeader) == "" {
		return func() {}
	}
	key := ex.Header.Get(frontHeldHeader)
	v, ok := p.sessions.Load(ss.ID())
	if !ok {
		return func() {}
	}
	fs := v.(*frontSession)
	h, _ := fs.ids.m.Load(key)
	r, ok := h.(*sdkRequest)
	if !ok || !r.taken.CompareAndSwap(false, true) {
		return func() {}
	}
	return func() { fs.ids.freeSDK(key, r) }
}

package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A fast-path call's own event stream. The fast front answers a call with
// one JSON response, unless the server asks the client something during
// the call (sampling, elicitation): then the answer becomes an event
// stream (the client's Accept header allows both), the request goes on
// it, and the answer follows on it once the call is done — where MCP puts
// a server request related to a call, whether or not the client keeps a
// standalone stream open. The client POSTs its response to the request as
// a JSON-RPC response on its session, which the fast front hands to the
// waiting call (fastPOST).

// callStreamKey holds a fast call's *callStream in the call's context.
type callStreamKey struct{}

// A callStream is the answer to one fast-path call.
type callStream struct {
	w  http.ResponseWriter
	fs *frontSession

	mu   sync.Mutex
	sse  bool // the answer is an event stream
	done bool // the answer is written
}

// ask sends a request to the client on the call's stream and returns the
// client's result. The request's id is the proxy's, so it cannot collide
// with the SDK's requests on the same session.
func (s *callStream) ask(ctx context.Context, p *Proxy, method string, params any) (json.RawMessage, error) {
	if !s.fs.offers(method) {
		return nil, rpcError(jsonrpc.CodeInvalidRequest, "provlog: the client did not declare the capability for %s", method)
	}
	pb, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id := strconv.Quote("provlog-ask-" + strconv.FormatUint(p.nextToken.Add(1), 10))
	ch := make(chan *wireMessage, 1)
	s.fs.asks.Store(id, ch)
	defer s.fs.asks.Delete(id)
	if err := s.write(appendRequest(nil, []byte(id), method, pb), false); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, &jsonrpc.Error{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
		}
		return m.Result, nil
	case <-ctx.Done():
		params := `{"requestId":` + id + `,"reason":"the server's request was given up"}`
		s.write(appendRequest(nil, nil, "notifications/cancelled", []byte(params)), false)
		return nil, ctx.Err()
	}
}

// write sends msg on the stream, turning the answer into an event stream
// first if it is not one yet; the last message ends it.
func (s *callStream) write(msg []byte, last bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errors.New("provlog: the call's stream is closed")
	}
	if !s.sse {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
		s.sse = true
	}
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	b = append(b, "\n\n"...)
	s.done = last
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(s.w).Flush()
}

// answer writes the call's response: as one JSON response, or as the last
// event of the stream if it became one.
func (s *callStream) answer(id, result json.RawMessage, rpcErr *jsonrpc.Error) {
	s.mu.Lock()
	if !s.sse {
		s.done = true
		s.mu.Unlock()
		writeRPC(s.w, id, result, rpcErr)
		return
	}
	s.mu.Unlock()
	s.write(appendResponse(nil, id, result, rpcErr), true)
}

// offers reports whether the session's client declared it serves method.
func (fs *frontSession) offers(method string) bool {
	ip := fs.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	switch method {
	case "sampling/createMessage":
		return ip.Capabilities.Sampling != nil
	case "elicitation/create":
		return ip.Capabilities.Elicitation != nil
	}
	return false
}

// deliver hands a client's response to the fast call waiting for it, and
// reports whether one was.
func (fs *frontSession) deliver(id []byte, msg *wireMessage) bool {
	v, ok := fs.asks.LoadAndDelete(string(id))
	if !ok {
		return false
	}
	v.(chan *wireMessage) <- msg
	return true
}

package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// A frontPrep is how a result of the server's (tools/call,
// resources/read, prompts/get) becomes what the client gets, decided
// from the result as received and its canonical form (frontPrepare) and
// carried out once its receipt is known (frontPrep.result).
type frontPrep struct {
	// members are the result's members as the client gets them but for
	// the receipt, for a result that is decoded and encoded again; nil
	// for one that gets its receipt spliced in as it is.
	members map[string]json.RawMessage
	// metaAt is where the receipt goes in the result as received: just
	// inside its own top-level _meta object; 0: a _meta of provlog's at
	// its front.
	metaAt int
}

// result is raw, a result as received that f was prepared for
// (frontPrepare), as the client gets it: as the server sent it, with the
// receipt added to its _meta and, if the server has a URI prefix, its
// URIs given their front form. The usual result gets the receipt spliced
// in, in a _meta member of its own at its front or at the front of the
// result's own _meta; any other has it added to the members prepared.
// A result that has grown past maxFrontResult is not given: its error
// says why (frontBound).
func (f frontPrep) result(raw json.RawMessage, receipt string) (json.RawMessage, error) {
	if m := f.members; m != nil {
		withReceipt(m, receipt) // its _meta is an object (frontPrepare)
		b, _ := json.Marshal(m)
		return frontBound(b)
	}
	at := f.metaAt
	if at == 0 {
		raw = bytes.TrimLeft(raw, " \t\r\n")
		at = 1
	}
	out := make([]byte, 0, len(raw)+len(receipt)+len(receipt)/32+48) // room for the receipt's escaped newlines
	out = append(out, raw[:at]...)
	if f.metaAt == 0 {
		out = append(out, `"_meta":{`...)
	}
	out = append(out, `"`+ReceiptKey+`":`...)
	out = appendJSONString(out, receipt)
	if f.metaAt == 0 {
		out = append(out, '}')
	}
	if rest := bytes.TrimLeft(raw[at:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return frontBound(append(out, raw[at:]...))
}

// maxFrontResult bounds a result as the client gets it: what a go-sdk
// client takes in one stdio line or one event (maxEventBytes), less 1 KiB
// for what goes around the result there (the JSON-RPC response's members
// with the client's id, the event's id and type lines). A result a few
// bytes under the bound as the server sent it grows past it with its
// receipt and URI prefixes, and a client that reads a line or an event
// past its bound ends its session.
const maxFrontResult = maxEventBytes - 1<<10

// frontBound is out, a result as the client gets it, or, past
// maxFrontResult, an error saying so.
func frontBound(out json.RawMessage) (json.RawMessage, error) {
	if len(out) > maxFrontResult {
		return nil, fmt.Errorf("with its receipt it is %d bytes, over the %d a client takes in one message (%d MiB, less 1 KiB for the response around it)", len(out), maxFrontResult, maxEventBytes>>20)
	}
	return out, nil
}

// frontPrepare prepares raw, a result of method (tools/call,
// resources/read, prompts/get) as received, for frontPrep.result. canon
// is raw's canonical form, if it has one. The usual result, an object
// with nothing to rewrite, costs a scan or two; any other is decoded
// into its members, given front URIs for what it holds (uriMember). Its
// error is the one the client gets: a tools/call result, prepared before
// its outcome is recorded, that the client cannot be given is a failed
// call.
func (d *downstream) frontPrepare(method string, raw json.RawMessage, canon []byte) (frontPrep, error) {
	if at, ok := d.spliced(raw, canon); ok {
		return frontPrep{metaAt: at}, nil
	}
	m, err := resultMembers(method, raw)
	if err != nil {
		return frontPrep{}, err
	}
	key := uriMember(method)
	if up := d.cfg.uriPrefix(); up != "" && bytes.Contains(m[key], []byte(`"uri"`)) {
		v, err := frontURIs(up, key, m[key])
		if err != nil {
			return frontPrep{}, fmt.Errorf("the result's %s is not an array of objects", key)
		}
		m[key] = v
	}
	return frontPrep{members: m}, nil
}

// resultMembers is raw, a result of method, as a map of its members: a
// JSON object, whose _meta, if it has one, is an object.
func resultMembers(method string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the %s result is not a JSON object", method)
	}
	if meta := m["_meta"]; meta != nil {
		var v map[string]json.RawMessage
		if json.Unmarshal(meta, &v) != nil || v == nil {
			return nil, fmt.Errorf("the result's _meta is not an object")
		}
	}
	return m, nil
}

// uriMember is the member of a result of method whose URIs the client
// gets in their front form: a tools/call's content blocks (resource
// links, embedded resources), the contents a resources/read read, the
// resource content of a prompts/get's messages.
func uriMember(method string) string {
	switch method {
	case "resources/read":
		return "contents"
	case "prompts/get":
		return "messages"
	}
	return "content"
}

// frontURIs gives the URIs in v, the member key of a result (uriMember),
// a JSON array of objects, their front form (prefix up).
func frontURIs(up, key string, v json.RawMessage) (json.RawMessage, error) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, err
	}
	for _, it := range items {
		switch {
		case it == nil:
		case key == "contents": // [{uri, ...}]
			it["uri"] = prefixURI(up, it["uri"])
		case key == "messages": // [{role, content: a block}]
			var block map[string]json.RawMessage
			if json.Unmarshal(it["content"], &block) == nil && block != nil {
				frontBlock(up, block)
				it["content"], _ = json.Marshal(block)
			}
		default: // content blocks
			frontBlock(up, it)
		}
	}
	return json.Marshal(items)
}

// spliced reports whether frontPrep.result gives raw, a result as received,
// its receipt by splicing it in, and where: a JSON object with, if the
// server has a URI prefix, no URI to rewrite, and either no _meta member
// (at 0: the receipt goes in a _meta of its own) or a _meta object
// without a receipt in it (at: just inside that object). canon, raw's
// canonical form if it has one, spells every key plainly and holds no
// key twice, so that a scan of it tells; without it, raw must not hold
// "_meta" anywhere nor an escape that could spell it, and must be valid
// JSON.
func (d *downstream) spliced(raw, canon []byte) (at int, ok bool) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return 0, false
	}
	up := d.cfg.uriPrefix()
	if canon == nil {
		return 0, !bytes.Contains(t, []byte(`"_meta"`)) && !bytes.Contains(t, []byte(`\u`)) &&
			(up == "" || !bytes.Contains(t, []byte(`"uri"`))) && json.Valid(t)
	}
	if up != "" && bytes.Contains(canon, []byte(`"uri"`)) {
		return 0, false
	}
	i := canonTop(canon, `"_meta":`)
	if i < 0 {
		return 0, true
	}
	if canon[i] != '{' || canonTop(canon[i:], `"`+ReceiptKey+`":`) >= 0 {
		return 0, false // no object, or one that holds a receipt already: merged
	}
	_, at, _ = topMemberAt(raw, "_meta")
	if at < 0 || raw[at] != '{' {
		return 0, false // not expected: canon is raw's
	}
	return at + 1, true
}

// withoutTop is obj, a JSON object as received, without its first
// top-level member key, which is cut out of its bytes with the comma that
// parts it from the next member (or the one before, if it is the last);
// obj as it is if it has no such member. What is left of obj is as it
// was.
func withoutTop(obj []byte, key string) []byte {
	at, _, end := topMemberAt(obj, key)
	if at < 0 || end < 0 {
		return obj // none, or it does not end: obj is no JSON object
	}
	from, to := at, end
	if k := skipSpace(obj, end); k < len(obj) && obj[k] == ',' {
		to = k + 1
	} else {
		for k := at - 1; k > 0; k-- {
			if c := obj[k]; c == ',' {
				from = k
				break
			} else if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				break
			}
		}
	}
	return append(append(make([]byte, 0, len(obj)-(to-from)), obj[:from]...), obj[to:]...)
}

// keyIs reports whether s, a JSON string as written, is key.
func keyIs(s []byte, key string) bool {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1:len(s)-1]) == key
	}
	var k string
	return json.Unmarshal(s, &k) == nil && k == key
}

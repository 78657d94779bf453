package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// A frontPrep is how a call's result becomes what the client gets, decided
// when the call's outcome is classified (frontMembers) and carried out
// once its receipt is known (frontResult).
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

// frontResult is c's result, a downstream tools/call result, as the client
// gets it: as the server sent it, with the receipt added to its _meta
// and, if the server has a URI prefix, resource links and embedded
// resources given their front URIs. Whatever set c.result prepared it
// (frontMembers), which also said whether the client can be given it.
// The usual result gets the receipt spliced in, in a _meta member of its
// own at its front or at the front of the result's own _meta; any other
// has it added to the members prepared.
func frontResult(c *call, receipt string) json.RawMessage {
	if m := c.front.members; m != nil {
		withReceipt(m, receipt) // its _meta is an object (frontMembers)
		b, _ := json.Marshal(m)
		return b
	}
	raw, at := c.result, c.front.metaAt
	if at == 0 {
		raw = bytes.TrimLeft(raw, " \t\r\n")
		at = 1
	}
	out := make([]byte, 0, len(raw)+len(receipt)+len(receipt)/32+48) // room for the receipt's escaped newlines
	out = append(out, raw[:at]...)
	if c.front.metaAt == 0 {
		out = append(out, `"_meta":{`...)
	}
	out = append(out, `"`+ReceiptKey+`":`...)
	out = appendJSONString(out, receipt)
	if c.front.metaAt == 0 {
		out = append(out, '}')
	}
	if rest := bytes.TrimLeft(raw[at:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, raw[at:]...)
}

// frontMembers prepares raw, a tools/call result as received, for
// frontResult, before its outcome is recorded: a result the client cannot
// be given is a failed call. canon is raw's canonical form, if it has
// one. The usual result, an object with nothing to rewrite, costs a scan
// or two; any other is decoded into its members, given front URIs for its
// content. Its error is the one the client gets.
func (d *downstream) frontMembers(raw json.RawMessage, canon []byte) (frontPrep, error) {
	if at, ok := d.spliced(raw, canon); ok {
		return frontPrep{metaAt: at}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return frontPrep{}, fmt.Errorf("the tools/call result is not a JSON object")
	}
	if meta := m["_meta"]; meta != nil {
		var v map[string]json.RawMessage
		if json.Unmarshal(meta, &v) != nil || v == nil {
			return frontPrep{}, fmt.Errorf("the result's _meta is not an object")
		}
	}
	if up := d.cfg.uriPrefix(); up != "" && bytes.Contains(m["content"], []byte(`"uri"`)) {
		content, err := frontContent(up, m["content"])
		if err != nil {
			return frontPrep{}, fmt.Errorf("the result's content is not an array of objects")
		}
		m["content"] = content
	}
	return frontPrep{members: m}, nil
}

// spliced reports whether frontResult gives raw, a result as received,
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
	at = rawTop(raw, "_meta")
	if at < 0 || raw[at] != '{' {
		return 0, false // not expected: canon is raw's
	}
	return at + 1, true
}

// rawTop returns where the value of the top-level member key of obj, a
// JSON object as received (white space and escapes as its writer chose),
// begins, or -1 if it has none. A key with an escape in it is decoded to
// be compared. One pass over obj, linear in it.
func rawTop(obj []byte, key string) int {
	depth, isKey := 0, false
	for i := 0; i < len(obj); i++ {
		switch c := obj[i]; c {
		case '"':
			end := stringEnd(obj, i+1)
			if depth == 1 && isKey && end < len(obj) && keyIs(obj[i:end+1], key) {
				j := end + 1
				for j < len(obj) && (obj[j] == ' ' || obj[j] == '\t' || obj[j] == '\r' || obj[j] == '\n' || obj[j] == ':') {
					j++
				}
				if j < len(obj) {
					return j
				}
				return -1
			}
			isKey, i = false, end
		case '{', '[':
			depth++
			isKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			isKey = depth == 1
		}
	}
	return -1
}

// keyIs reports whether s, a JSON string as written, is key.
func keyIs(s []byte, key string) bool {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1:len(s)-1]) == key
	}
	var k string
	return json.Unmarshal(s, &k) == nil && k == key
}

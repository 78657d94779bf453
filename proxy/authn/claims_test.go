package authn

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// referenceClaims decodes a claims set the slow, obvious way, with
// encoding/json (exact member names, each decoded on its own), as the
// oracle parseClaims is held to. dup names a member that appears twice.
func referenceClaims(b []byte) (c *claims, dup, topDup string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw map[string]json.RawMessage
	if dec.Decode(&raw) != nil || raw == nil || dec.More() {
		return nil, "", "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", "", false // something after the object
	}
	dup, topDup = duplicateKey(b)
	c = &claims{raw: b}
	str := func(k string, dst *string) bool {
		v, has := raw[k]
		return !has || string(v) == "null" || json.Unmarshal(v, dst) == nil
	}
	list := func(k string, dst *[]string) bool {
		v, has := raw[k]
		if !has || string(v) == "null" {
			return true
		}
		var one string
		if json.Unmarshal(v, &one) == nil {
			*dst = []string{one}
			return true
		}
		var l []*string
		if json.Unmarshal(v, &l) != nil {
			return false
		}
		*dst = nil
		for _, e := range l {
			if e == nil {
				return false
			}
			*dst = append(*dst, *e)
		}
		return true
	}
	date := func(k string, dst **time.Time) bool {
		v, has := raw[k]
		if !has {
			return true
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 0 || f > 1<<40 {
			return false
		}
		t, err := numericDate(v)
		*dst = &t
		return err == nil
	}
	ok = str("iss", &c.Iss) && str("sub", &c.Sub) && str("jti", &c.Jti) && str("client_id", &c.ClientID) &&
		str("azp", &c.Azp) && str("scope", &c.Scope) && list("aud", &c.Aud) && list("scp", &c.Scp) &&
		date("exp", &c.Exp) && date("nbf", &c.Nbf) && date("iat", &c.Iat)
	if v, has := raw["act"]; ok && has && string(v) != "null" {
		c.Act, ok = referenceAct(v, 1)
	}
	if v, has := raw["active"]; ok && has {
		var act bool
		ok = json.Unmarshal(v, &act) == nil
		c.Active = &act
	}
	_, c.Cnf = raw["cnf"]
	c.EmailVerified = string(raw["email_verified"]) == "true"
	return c, dup, topDup, ok
}

func referenceAct(v json.RawMessage, depth int) (*log.Act, bool) {
	var m map[string]json.RawMessage
	if depth > log.MaxActDepth || json.Unmarshal(v, &m) != nil || m == nil {
		return nil, false
	}
	a := &log.Act{}
	for k, dst := range map[string]*string{"sub": &a.Subject, "iss": &a.Issuer, "client_id": &a.ClientID} {
		if r, has := m[k]; has && string(r) != "null" && json.Unmarshal(r, dst) != nil {
			return nil, false
		}
	}
	if a.Subject == "" {
		return nil, false
	}
	if r, has := m["act"]; has && string(r) != "null" {
		var ok bool
		if a.Act, ok = referenceAct(r, depth+1); !ok {
			return nil, false
		}
	}
	return a, true
}

// duplicateKey returns a member name that appears twice in one object of
// b (at any depth), and one that does so in the outermost object, or "".
func duplicateKey(b []byte) (dup, topDup string) {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj  bool
		key  bool // the next string token is a key
		seen map[string]bool
	}
	var stack []*frame
	cur := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return dup, topDup
		}
		f := cur()
		if s, isStr := tok.(string); isStr && f != nil && f.obj && f.key {
			if f.seen[s] {
				dup = s
				if len(stack) == 1 && topDup == "" {
					topDup = s
				}
			}
			f.seen[s] = true
			f.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, key: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if f := cur(); f != nil && f.obj {
			f.key = true // a value ended
		}
	}
}

// FuzzParseClaims holds the one-pass claims parser to the encoding/json
// oracle: what it accepts, the oracle accepts with the same claims; what
// it refuses, the oracle refuses too, or it holds a member twice.
func FuzzParseClaims(f *testing.F) {
	for _, s := range []string{
		`{"iss":"https://idp.example/","sub":"alice","aud":["https://provlog.example/mcp"],"exp":1796000000,"nbf":1795990000.5,"iat":1795990000,"jti":"j1","client_id":"agent","scope":"a b","act":{"sub":"agent-7","act":{"sub":"orchestrator","iss":"x"}}}`,
		`{"iss":"a\u00e9\"b","aud":"one","scp":["a","b"],"azp":"c","active":true,"cnf":null,"email_verified":false}`,
		` { "iss" : "x" , "sub" : null , "aud" : [ ] , "act" : null } `,
		`{"iss":"x","iss":"y"}`,
		`{"act":{"sub":"a","sub":"b"}}`,
		`{"exp":"1796000000"}`,
		`{"exp":1e3,"nbf":-1}`,
		`{"x":{"y":[1,{"z":"}"}]},"sub":"s"}`,
		`[1]`, `null`, `{"a":1} x`,
		`{"\u0069ss":"x","s\u0075b":"y","act":{"s\u0075b":"z"},"\u00ff":1}`, // escaped names: what encoding/json decodes
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseClaims(b)
		want, dup, topDup, ok := referenceClaims(b)
		switch {
		case err == nil && !ok:
			t.Fatalf("parseClaims(%q) accepted what encoding/json refuses: %+v", b, got)
		case err == nil && topDup != "" && isReadClaim(topDup):
			t.Fatalf("parseClaims(%q) accepted claim %s twice", b, topDup)
		case err == nil:
			got.raw, want.raw = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parseClaims(%q) = %+v, want %+v", b, got, want)
			}
		case ok && dup == "":
			t.Fatalf("parseClaims(%q) refused what encoding/json reads: %v", b, err)
		}
	})
}

// isReadClaim reports whether name is a member parseClaims or parseAct
// reads (and so refuses twice).
func isReadClaim(name string) bool {
	var c claims
	bit, _ := c.member([]byte(name), []byte("null"))
	return bit != 0
}

func TestParseClaims(t *testing.T) {
	for _, c := range []struct {
		in, err string
	}{
		{`{"iss":"x","ISS":"y","Sub":"z"}`, ""}, // names are case-sensitive: only iss is read
		{`{"iss":"x","iss":"y"}`, "claim iss appears twice"},
		{`{"exp":"1796000000"}`, "not a NumericDate"},
		{`{"aud":["a",1]}`, "neither a string nor an array of strings"},
		{`{"act":{"iss":"x"}}`, "names no sub"},
		{`{"active":"yes"}`, "not a boolean"},
		{`["iss"]`, "not a JSON object"},
		{`{"iss":"x"`, "not a JSON object"},
	} {
		got, err := parseClaims([]byte(c.in))
		if c.err == "" {
			if err != nil || got.Iss != "x" || got.Sub != "" {
				t.Errorf("parseClaims(%s) = %+v, %v; want iss x and no sub", c.in, got, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("parseClaims(%s): err %v, want one saying %q", c.in, err, c.err)
		}
	}
}

package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/provlog/provlog/log"
)

// FuzzRedactArgs feeds untrusted argument bytes to the redaction that runs
// before anything is hashed or written: it must never panic, and whatever
// it returns must hold no value of a redacted field anywhere.
func FuzzRedactArgs(f *testing.F) {
	f.Add([]byte(`{"password":"hunter22","user":"a"}`), "password")
	f.Add([]byte(`{"a":[{"api_key":{"x":1}},{"b":{"api_key":[1,2]}}]}`), "api_key")
	f.Add([]byte(`null`), "x")
	f.Add([]byte(`[1,2,{"k":"v"}] `), "k")
	f.Add([]byte(`{"k":1}{"k":2}`), "k")
	f.Fuzz(func(t *testing.T, raw []byte, field string) {
		out, _, err := redactArgs(raw, []string{field}, false)
		if err != nil {
			return
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("redacted arguments do not marshal: %v", err)
		}
		var check func(v any)
		check = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					if k == field && x != Redacted {
						t.Fatalf("field %q kept its value %v in %s", field, x, b)
					}
					check(x)
				}
			case []any:
				for _, x := range v {
					check(x)
				}
			}
		}
		var back any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&back); err != nil {
			t.Fatalf("redacted arguments do not parse back: %v", err)
		}
		check(back)
	})
}

// counted is a member name with the count scrubMembers puts after it;
// rawBreaks are line breaks with the indentation after them;
// escapedBreaks are those and JSON's escapes of them, at any depth.
var (
	counted       = regexp.MustCompile(`^(.*) \(\d+\)$`)
	rawBreaks     = regexp.MustCompile(`[\r\n][ \t\r\n]*`)
	escapedBreaks = regexp.MustCompile(`(?:\\+[rn]|[\r\n])(?:[ \t\r\n]|\\+[rnt])*`)
)

// FuzzScrubJSON feeds a downstream's result (untrusted) to the scrubbing
// of retained results: never a panic, no secret left in what is kept (as
// it is, URL-encoded or in a base64 string, broken into lines, indented
// or not), no member lost, and canonical text stays canonical.
func FuzzScrubJSON(f *testing.F) {
	f.Add([]byte(`{"content":[{"text":"Echo: hunter22","type":"text"}]}`), "hunter22")
	f.Add([]byte(`{"hunter22":[1,"a hunter22 b"],"n":12345}`), "12345")
	f.Add([]byte(`{"a":"\u0068unter22"}`), "hunter22")
	f.Add([]byte(`not json hunter22`), "hunter22")
	f.Add([]byte(`{"content":[{"text":"ok {\"password\":\"o\"}","type":"text"}],"n":10}`), "o")
	f.Add([]byte(`{"k":"x","n":17}`), "7")
	// Numbers JCS writes as others: a result hashed as received, and one
	// in JCS form already (18446744073709552000 is 2^64 there).
	f.Add([]byte(`{"id":12345678901234567891, "t":"hunter22"}`), "hunter22")
	f.Add([]byte("{\"n\":18446744073709552000,\"t\":\"hunter22 \u2028\"}"), "hunter22")
	f.Add([]byte(`{"data":"aHVudGVyMjI=","type":"image"}`), "hunter22")
	f.Add([]byte(`{"blob":"eGh1bnRlcjIyeXo"}`), "hunter22")
	f.Add([]byte(`{"text":"see /q?t=sk%2Fa%2Bb and /p/sk%2Fa+b"}`), "sk/a+b")
	f.Add([]byte(`{"requestState":"st.YW5zMS1TZWNyZXQvNCtrcQ"}`), "ans1-Secret/4+kq") // base64 inside a string
	f.Add([]byte(`{"s":"x-eGh1bnRlcjIyeXo.y","t":"ab/aHVudGVyMjI=/c"}`), "hunter22")  // a run starting off a group
	f.Add([]byte(`{"t":"hunter22 (aHVudGVyMjI=)"}`), "hunter22")                      // the value and its base64
	// Member names: base64 of it, and names that scrubbing makes equal.
	f.Add([]byte(`{"[redacted]":1,"aHVudGVyMjI=":{"x-eGh1bnRlcjIyeXo":2},"hunter22":3}`), "hunter22")
	// Base64 broken into lines, in a string and in a JSON text inside one,
	// indented or not.
	held := append(bytes.Repeat([]byte{0xfb}, 50), "hunter22-wrapped"...)
	for _, v := range []string{
		mimeWrap(base64.StdEncoding, held, "\r\n"),
		`{"b":"` + mimeWrap(base64.URLEncoding, held, `\n`) + `"}`,
		`{"d":"{\"b\":\"` + mimeWrap(base64.StdEncoding, held, `\\n`) + `\"}"}`,
		"k: |\n  " + mimeWrap(base64.StdEncoding, held, "\r\n  ") + "\n",
		"{\n\t\"b\": \"" + mimeWrap(base64.URLEncoding, held, `\n\t\t`) + "\"\n}",
	} {
		b, _ := json.Marshal(map[string]string{"text": v})
		f.Add(b, "hunter22-wrapped")
		b, _ = json.Marshal(map[string]int{v: 1}) // as a member name
		f.Add(b, "hunter22-wrapped")
	}
	f.Fuzz(func(t *testing.T, data []byte, secret string) {
		if secret == "" {
			return // never a secret: empty values are not collected
		}
		out, _ := scrubJSON(data, appendSecrets(nil, secret)) // as redactArgs collects them
		canon, err := log.Canonicalize(data)
		if err != nil || string(canon) != string(data) || strings.Contains(Redacted, secret) {
			return
		}
		if c, err := log.Canonicalize(out); err != nil || string(c) != string(out) {
			t.Fatalf("canonical %s scrubbed to non-canonical %s", data, out)
		}
		// No value, member name or number of what is kept holds the secret.
		dec := json.NewDecoder(strings.NewReader(string(out)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		var check func(v any)
		check = func(v any) {
			switch x := v.(type) {
			case string:
				checkScrubbed(t, x, secret, out)
			case json.Number:
				check(string(x))
			case map[string]any:
				for k, e := range x {
					// A count scrubMembers put after a scrubbed name is
					// provlog's text, whatever secret it may look like.
					if m := counted.FindStringSubmatch(k); m != nil && (m[1] == Withheld || strings.Contains(m[1], Redacted)) {
						k = m[1]
					}
					check(k)
					check(e)
				}
			case []any:
				for _, e := range x {
					check(e)
				}
			}
		}
		check(v)
		// No member is lost to a name that scrubbing made another's.
		var in any
		json.Unmarshal(data, &in)
		if got, want := members(v), members(in); got != want {
			t.Fatalf("%d members kept of %d: %s scrubbed to %s", got, want, data, out)
		}
	})
}

// checkScrubbed fails t if the text x (of what a scrub returned, out)
// holds secret: as it is, URL-encoded, or in base64 starting anywhere
// inside it (decoded up to its first character of no alphabet; the
// decoder skips line breaks), also with its line breaks and the
// indentation after them gone, x read as it is or as a JSON text (escaped
// breaks and tabs: `\n`, `\\n` in JSON in JSON).
func checkScrubbed(t *testing.T, x, secret string, out []byte) {
	t.Helper()
	if x == Withheld || x == Redacted {
		return // a short secret withholds the whole string
	}
	if strings.Contains(x, secret) || strings.Contains(x, url.QueryEscape(secret)) || strings.Contains(x, url.PathEscape(secret)) {
		t.Fatalf("%q left in %s", secret, out)
	}
	if b, err := base64.StdEncoding.DecodeString(x); err == nil && len(secret) >= minSecretLen && strings.Contains(string(b), secret) {
		t.Fatalf("%q left, base64, in %s", secret, out)
	}
	for _, y := range []string{x, rawBreaks.ReplaceAllString(x, ""), escapedBreaks.ReplaceAllString(x, "")} {
		for i := 0; i < len(y) && len(y) <= 1<<12 && len(secret) >= minSecretLen; i++ {
			for _, enc := range base64Alphabets {
				rest, _, _ := strings.Cut(y[i:], "=")
				if b, _ := enc.WithPadding(base64.NoPadding).DecodeString(rest); strings.Contains(string(b), secret) {
					t.Fatalf("%q left, base64 at %d of %q, in %s", secret, i, y, out)
				}
			}
		}
	}
}

// FuzzScrub feeds a downstream's error text or stderr line (untrusted) to
// the scrubbing of the texts provlog writes: never a panic, and no secret
// left in what is written, as FuzzScrubJSON checks a kept result's
// strings (the one scanner, scrubText, does both).
func FuzzScrub(f *testing.F) {
	held := append(bytes.Repeat([]byte{0xfb}, 50), "hunter22-wrapped"...)
	for _, s := range []string{
		"refused hunter22-wrapped",
		"refused aHVudGVyMjItd3JhcHBlZA== and hunter22-wrapped",
		"cannot fetch /t/aHVudGVyMjItd3JhcHBlZA/x",
		"bad key:\n  " + mimeWrap(base64.StdEncoding, held, "\r\n  "),
		`invalid {"k":"` + mimeWrap(base64.URLEncoding, held, `\n\t`) + `"}`,
		"leakfx got {\"Token\":\"hunter22-wrapped\"}",
	} {
		f.Add(s, "hunter22-wrapped")
	}
	f.Add("ab aGk= hi", "hi")
	f.Fuzz(func(t *testing.T, text, secret string) {
		if secret == "" || strings.Contains(Redacted, secret) {
			return // never a secret: empty values are not collected
		}
		out := scrub(text, appendSecrets(nil, secret))
		checkScrubbed(t, out, secret, []byte(out))
		// A server that echoes it upper-cased (foldCase).
		upper := strings.ToUpper(secret)
		if f, _ := foldCase(upper); f == folded([]string{secret})[0] && !strings.Contains(strings.ToUpper(Redacted), upper) {
			out := scrub(strings.ToUpper(text), appendSecrets(nil, secret))
			checkScrubbed(t, out, upper, []byte(out))
		}
	})
}

// FuzzFoldCase: foldCase folds each character as foldRune does, keeps
// bytes that are not UTF-8, and maps each byte of what it returns to the
// character of s it came of.
func FuzzFoldCase(f *testing.F) {
	for _, s := range []string{"S3CRET-Up1", "caf\u00e9 \u212a\u017f \u03a3\u03c2", "a\xffb", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, at := foldCase(s)
		var want []byte
		var from []int
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			k := len(want)
			if r == utf8.RuneError && n == 1 {
				want = append(want, s[i])
			} else {
				want = utf8.AppendRune(want, foldRune(r))
			}
			for range len(want) - k {
				from = append(from, i)
			}
			i += n
		}
		if got != string(want) {
			t.Fatalf("foldCase(%q) = %q, want %q", s, got, want)
		}
		if at == nil && len(got) != len(s) {
			t.Fatalf("foldCase(%q) = %q, changing its length, with no offsets", s, got)
		}
		if at != nil && !slices.Equal(at, append(from, len(s))) {
			t.Fatalf("foldCase(%q) offsets %v, want %v", s, at, append(from, len(s)))
		}
	})
}

// members counts the members of the objects in v.
func members(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += 1 + members(e)
		}
	case []any:
		for _, e := range x {
			n += members(e)
		}
	}
	return n
}

// FuzzRedactURI: redactURI keeps everything but the values it replaces:
// the part before the query and the fragment as written, a URI with no
// redacted parameter whole, and each redacted parameter's value gone from
// the query it returns (unless another, unredacted parameter holds it
// too). It is linear: one split of the query.
func FuzzRedactURI(f *testing.F) {
	for _, s := range []string{"file:///a?token=s3cr3t&x=1#f", "x?TOKEN=a%2Db&token", "?=&&token==#?token=x", "no-query", "a?b=c"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, uri string, fold bool) {
		out, secrets := redactURI(uri, []string{"token"}, fold)
		if secrets == nil {
			if out != uri {
				t.Fatalf("%q: nothing redacted, but it became %q", uri, out)
			}
			return
		}
		q := strings.IndexByte(uri, '?')
		if out[:q+1] != uri[:q+1] {
			t.Fatalf("%q: the part before the query became %q", uri, out)
		}
		if _, frag, ok := strings.Cut(uri[q+1:], "#"); ok && !strings.HasSuffix(out, "#"+frag) {
			t.Fatalf("%q: the fragment %q is not kept in %q", uri, frag, out)
		}
		query, _, _ := strings.Cut(out[q+1:], "#")
		for _, kv := range strings.Split(query, "&") {
			k, v, hasValue := strings.Cut(kv, "=")
			if name, err := url.QueryUnescape(k); hasValue && err == nil && strings.EqualFold(name, "token") && (fold || name == "token") && v != Redacted {
				t.Fatalf("%q: parameter %q kept its value %q in %q", uri, k, v, out)
			}
		}
	})
}

// FuzzIndexFolded: indexFolded finds what strings.Index does.
func FuzzIndexFolded(f *testing.F) {
	f.Add("LOREM IPSUM S3CRET-UP1 S3CRET-UP1", "S3CRET-UP1")
	f.Add("AAB", "AB")
	f.Add("A1A1B", "A1B")
	f.Fuzz(func(t *testing.T, s, x string) {
		if got, want := indexFolded(s, x), strings.Index(s, x); got != want {
			t.Fatalf("indexFolded(%q, %q) = %d, want %d", s, x, got, want)
		}
	})
}

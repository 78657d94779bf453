package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The forms a redacted value is written in besides its own (redact.go):
// as a client escaped it in JSON, as a JSON text of only ASCII writes it,
// and as a JSON string holds a text with a backslash or a quote.

// writtenSecrets returns the strings of the redacted values in raw (a
// call's arguments or a client's answer, as the client wrote them) that
// it wrote with JSON's escapes ("\u0065" for "e", "\/" for "/"), as
// written: a server that echoes what it was sent as it came (a log line
// of the request, an image of its bytes) quotes them so, where the values
// as read (redactArgs) are not found. It reads raw once, and not at all
// if raw holds no backslash.
func writtenSecrets(raw []byte, fields []string, fold bool) []string {
	if len(fields) == 0 || bytes.IndexByte(raw, '\\') < 0 {
		return nil
	}
	redacted := redactedName(fields, fold)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct{ obj, key bool } // an object, expecting a key next
	var stack []frame
	var out []string
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj && top.key {
			top.key = false
			if k, _ := tok.(string); redacted(k) {
				start := dec.InputOffset()
				if skipJSONValue(dec) != nil {
					return out
				}
				out = appendEscaped(out, raw[start:dec.InputOffset()])
				top.key = true
			}
			continue
		}
		if top != nil && top.obj {
			top.key = true // a value: a key comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		}
	}
}

// skipJSONValue reads the next value of dec.
func skipJSONValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// appendEscaped adds the insides of the string literals of the JSON text
// v that hold an escape.
func appendEscaped(out []string, v []byte) []string {
	for i := 0; i < len(v); i++ {
		if v[i] != '"' {
			continue
		}
		j := i + 1
		for ; j < len(v) && v[j] != '"'; j++ {
			if v[j] == '\\' {
				j++
			}
		}
		if s := v[i+1 : min(j, len(v))]; bytes.IndexByte(s, '\\') >= 0 {
			out = append(out, string(s))
		}
		i = j
	}
	return out
}

// asciiEscaped is the JSON string text s with every character beyond
// ASCII escaped as its UTF-16 code units, each formatted by format.
func asciiEscaped(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, format, u)
		}
	}
	return b.String()
}

// jsonQuoted escapes a text as a JSON string holds it (its backslashes
// and quotes).
var jsonQuoted = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// maxEscapeDepth bounds how many times a text is read as a JSON string
// holds it (escapedViews): a JSON text in a string in a JSON text is two.
const maxEscapeDepth = 4

// escapedViews returns s read as the inside of a JSON string, and that
// read again, while the reading changes it and it still holds an escape
// that can write a secret's character (\u, \/: a server's encoder may
// write any character as \u00XX, PHP's every '/' as \/), at most
// maxEscapeDepth times; none if s holds no such escape. A secret in one
// of them is in s escaped (scrubText, mayHoldSecret).
func escapedViews(s string) []string {
	var out []string
	for range maxEscapeDepth {
		if !strings.Contains(s, `\u`) && !strings.Contains(s, `\/`) {
			break
		}
		u := jsonUnescaped(s)
		if u == s {
			break
		}
		out = append(out, u)
		s = u
	}
	return out
}

// jsonUnescaped is s with each JSON string escape in it (\", \\, \/, \b,
// \f, \n, \r, \t, \uXXXX, a surrogate pair as one character) written as
// the character it stands for; a backslash starting no escape is kept,
// as is a lone surrogate's escape.
func jsonUnescaped(s string) string {
	var b strings.Builder
	kept := 0 // s[kept:i] is still to be copied
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		var r rune
		n := 2
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			r = rune(c)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			r, n = hex4(s, i+2), 6
			if r < 0 {
				continue
			}
			if utf16.IsSurrogate(r) {
				lo := rune(-1)
				if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
					lo = hex4(s, i+8)
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					continue
				}
				n = 12
			}
		default:
			continue
		}
		b.WriteString(s[kept:i])
		b.WriteRune(r)
		kept = i + n
		i += n - 1
	}
	if kept == 0 {
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

// hex4 is the value of the four hex digits at s[i:], or -1.
func hex4(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

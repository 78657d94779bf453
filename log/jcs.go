package log

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// maxJCSDepth bounds how deeply arrays and objects may nest in the input to
// [Canonicalize]. The parser recurses once per level, so without a bound an
// untrusted document of a few megabytes of '[' could exhaust the stack.
const maxJCSDepth = 100

// Canonicalize parses data as one JSON value and returns its canonical form
// according to RFC 8785 (JSON Canonicalization Scheme, JCS).
//
// data must be a single JSON text (RFC 8259) in UTF-8, optionally surrounded
// by whitespace. It must also be I-JSON (RFC 7493) as RFC 8785 §3.1 requires,
// so Canonicalize rejects what JCS cannot represent faithfully: duplicate
// object keys (compared after unescaping), invalid UTF-8, escaped lone
// surrogates such as "\ud800", and numbers that round to ±Inf as IEEE-754
// doubles. Numbers too small for a double round to 0, as they do in
// ECMAScript. Arrays and objects may nest at most 100 deep.
//
// The output has no whitespace; object members are sorted by the UTF-16 code
// units of their keys (§3.2.3); strings escape only '"', '\\' and U+0000 to
// U+001F, and every other character is raw UTF-8 (§3.2.2.2); numbers are
// written as ECMAScript's Number.prototype.toString writes them (§3.2.2.3).
//
// Errors name the problem and the byte offset in data where it was found.
func Canonicalize(data []byte) ([]byte, error) {
	p := jcsParser{in: data, out: make([]byte, 0, len(data))}
	p.skipSpace()
	if err := p.value(0); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return nil, p.errorf(p.pos, "unexpected %s after top-level value", jcsDescribe(p.in[p.pos]))
	}
	return p.out, nil
}

// isCanonical reports whether data is already in RFC 8785 canonical form,
// that is, whether [Canonicalize] accepts it and returns it unchanged.
func isCanonical(data []byte) bool {
	out, err := Canonicalize(data)
	return err == nil && bytes.Equal(out, data)
}

// jcsParser reads JSON from in and writes the canonical form to out in the
// same pass.
//
// An object's members are written to out in input order, separated by
// commas, and are permuted in place only when they turn out not to be sorted
// already. Permuting copies the object's text through scratch, so a byte of
// output is copied at most once per enclosing unsorted object: at most
// maxJCSDepth times, through one reused buffer.
type jcsParser struct {
	in  []byte
	pos int
	out []byte

	members []jcsMember // a stack: each open object owns a suffix
	scratch []byte      // reused by every object that has to be permuted
	str     []byte      // reused by every decoded string

	probes int // key comparisons and lookups made to find duplicates (tests count work by it)
}

// A jcsMember is one object member already written to the parser's out.
type jcsMember struct {
	key        string // unescaped
	start, end int    // `"key":value` is out[start:end]
}

func (p *jcsParser) errorf(offset int, format string, args ...any) error {
	return fmt.Errorf("jcs: "+format+" at offset %d", append(args, offset)...)
}

// unexpected reports the byte at p.pos, or the end of input, as the error.
func (p *jcsParser) unexpected(want string) error {
	if p.pos >= len(p.in) {
		return p.errorf(p.pos, "unexpected end of input, want %s", want)
	}
	return p.errorf(p.pos, "unexpected %s, want %s", jcsDescribe(p.in[p.pos]), want)
}

// jcsDescribe names a byte for an error message.
func jcsDescribe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// jcsQuote quotes s for an error message, cut short so that an error never
// carries much of an untrusted document.
func jcsQuote(s string) string {
	const max = 32
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

func (p *jcsParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the byte at p.pos, or -1 at the end of input.
func (p *jcsParser) peek() int {
	if p.pos < len(p.in) {
		return int(p.in[p.pos])
	}
	return -1
}

// value canonicalizes the value at p.pos, which is inside depth containers.
func (p *jcsParser) value(depth int) error {
	switch c := p.peek(); {
	case c == '{':
		return p.object(depth+1, nil)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, lit, err := p.quoted()
		if err != nil {
			return err
		}
		p.out = appendQuoted(p.out, s, lit)
		return nil
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return p.unexpected("a value")
	}
}

func (p *jcsParser) literal(lit string) error {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return p.errorf(p.pos, "invalid literal, want %s", lit)
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *jcsParser) array(depth int) error {
	if depth > maxJCSDepth {
		return p.errorf(p.pos, "nesting deeper than %d", maxJCSDepth)
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.peek() == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		p.skipSpace()
		if err := p.value(depth); err != nil {
			return err
		}
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return nil
		default:
			return p.unexpected("',' or ']'")
		}
	}
}

// jcsMapAfter is the member count above which duplicate keys are found with
// a map rather than by comparing against every earlier key.
const jcsMapAfter = 8

// object canonicalizes the object at p.pos, which is inside depth-1
// containers. each, if not nil, is called with each member as it is read
// (as WalkObject's fn is: its value's canonical form is good until each
// returns), and its error ends the reading.
func (p *jcsParser) object(depth int, each func(key string, raw, canon []byte) error) error {
	if depth > maxJCSDepth {
		return p.errorf(p.pos, "nesting deeper than %d", maxJCSDepth)
	}
	p.pos++ // '{'
	p.out = append(p.out, '{')
	body := len(p.out)
	mark := len(p.members)
	defer func() { p.members = p.members[:mark] }()
	var seen map[string]bool

	p.skipSpace()
	if p.peek() == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return nil
	}
	for {
		s, lit, key, err := p.memberKey(mark, &seen)
		if err != nil {
			return err
		}
		start := len(p.out)
		p.out = appendQuoted(p.out, s, lit)
		p.out = append(p.out, ':')
		vstart, in := len(p.out), p.pos
		if err := p.value(depth); err != nil {
			return err
		}
		if each != nil {
			if err := each(key, p.in[in:p.pos], p.out[vstart:]); err != nil {
				return err
			}
		}
		p.members = append(p.members, jcsMember{key: key, start: start, end: len(p.out)})

		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case '}':
			p.pos++
			p.sortMembers(body, p.members[mark:])
			p.out = append(p.out, '}')
			return nil
		default:
			return p.unexpected("',' or '}'")
		}
	}
}

// memberKey reads a member's key, the ':' after it and the space before
// its value: the key's decoded bytes (valid until the next read), its
// literal if it has no escapes (see quoted), and the key as a string,
// which is the input's own bytes when it has no escapes (most keys: a
// copy of each cost an allocation per member). A key that repeats one of the open object's members so
// far, p.members[mark:], is refused here, where it starts, so that a
// duplicate is reported in input order before any error later in the
// object.
func (p *jcsParser) memberKey(mark int, seen *map[string]bool) (s, lit []byte, key string, err error) {
	p.skipSpace()
	if p.peek() != '"' {
		return nil, nil, "", p.unexpected("a string key")
	}
	offset := p.pos
	s, lit, err = p.quoted()
	if err != nil {
		return nil, nil, "", err
	}
	if lit != nil {
		key = unsafe.String(unsafe.SliceData(s), len(s)) // s is in p.in
	} else {
		key = string(s) // s is in p.str, reused
	}
	if p.duplicate(mark, seen, key) {
		return nil, nil, "", p.errorf(offset, "duplicate key %s", jcsQuote(key))
	}
	p.skipSpace()
	if p.peek() != ':' {
		return nil, nil, "", p.unexpected("':'")
	}
	p.pos++
	p.skipSpace()
	return s, lit, key, nil
}

// duplicate reports whether key is the key of one of the open object's
// members so far, p.members[mark:]. Up to jcsMapAfter members it compares
// key with each; beyond, it makes *seen (once) and looks key up there,
// adding it. Either way the work per key is bounded, so an object of n
// keys costs O(n) probes, not O(n²).
func (p *jcsParser) duplicate(mark int, seen *map[string]bool, key string) bool {
	members := p.members[mark:]
	if *seen == nil {
		if len(members) < jcsMapAfter {
			for _, m := range members {
				p.probes++
				if m.key == key {
					return true
				}
			}
			return false
		}
		*seen = make(map[string]bool, 2*len(members))
		for _, m := range members {
			(*seen)[m.key] = true
		}
		p.probes += len(members)
	}
	p.probes++
	if (*seen)[key] {
		return true
	}
	(*seen)[key] = true
	return false
}

// sortMembers puts the members, written from out[body:] on in input order,
// in the order RFC 8785 §3.2.3 requires.
func (p *jcsParser) sortMembers(body int, members []jcsMember) {
	byKey := func(a, b jcsMember) int { return compareUTF16(a.key, b.key) }
	if slices.IsSortedFunc(members, byKey) {
		return
	}
	p.scratch = append(p.scratch[:0], p.out[body:]...)
	slices.SortFunc(members, byKey) // keys are unique, so stability is moot
	p.out = p.out[:body]
	for i, m := range members {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.scratch[m.start-body:m.end-body]...)
	}
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// the order of RFC 8785 §3.2.3. It differs from byte (code point) order only
// where a character above U+FFFF meets one in U+E000 to U+FFFF: the former's
// leading surrogate (U+D800 to U+DBFF) sorts first.
func compareUTF16(a, b string) int {
	// Where the strings first differ in two ASCII bytes (the usual case:
	// keys are ASCII), those are whole characters after equal ones, and
	// compare as bytes.
	n := min(len(a), len(b))
	j := 0
	for j < n && a[j] == b[j] {
		j++
	}
	switch {
	case j == n:
		return cmp.Compare(len(a), len(b))
	case a[j] < utf8.RuneSelf && b[j] < utf8.RuneSelf:
		return cmp.Compare(a[j], b[j])
	}
	i := 0
	for i < len(a) && i < len(b) {
		ra, n := utf8.DecodeRuneInString(a[i:])
		rb, _ := utf8.DecodeRuneInString(b[i:])
		if ra != rb {
			// Characters above U+FFFF that share a leading surrogate
			// compare by their trailing one, which follows code point order.
			return cmp.Or(cmp.Compare(jcsFirstUnit(ra), jcsFirstUnit(rb)), cmp.Compare(ra, rb))
		}
		i += n
	}
	return cmp.Compare(len(a), len(b))
}

// jcsFirstUnit returns the first UTF-16 code unit of r.
func jcsFirstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xd800 + (r-0x10000)>>10
}

// quoted decodes the string literal at p.pos. The result is valid UTF-8 and
// is only good until the next call; it must not be written to. lit is the
// literal as it is in the input, quotes and all, if it holds no escape
// (else nil): the string's canonical form then, as RFC 8785 escapes only
// what such a literal cannot hold (quote, backslash, control characters).
func (p *jcsParser) quoted() (s, lit []byte, err error) {
	p.pos++ // '"'
	// Most strings have no escapes: their bytes in the input are their
	// value, and are handed out as they are, without a copy. The first
	// escape (or anything to refuse) sends the rest through the loop
	// below, which copies.
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			p.pos++
			return p.in[start : p.pos-1 : p.pos-1], p.in[start-1 : p.pos : p.pos], nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			p.pos++
			continue
		}
		r, n := utf8.DecodeRune(p.in[p.pos:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		p.pos += n
	}
	s = append(p.str[:0], p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return nil, nil, p.errorf(p.pos, "unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.str = s
			return s, nil, nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return nil, nil, err
			}
			s = utf8.AppendRune(s, r)
		case c < 0x20:
			return nil, nil, p.errorf(p.pos, "unescaped control character %s in string", jcsDescribe(c))
		case c < utf8.RuneSelf:
			s = append(s, c)
			p.pos++
		default:
			// DecodeRune also refuses overlong forms and encoded
			// surrogates, which RFC 3629 makes invalid UTF-8.
			r, n := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && n == 1 {
				return nil, nil, p.errorf(p.pos, "invalid utf-8")
			}
			s = append(s, p.in[p.pos:p.pos+n]...)
			p.pos += n
		}
	}
}

// escape decodes the escape sequence at p.pos, joining a surrogate pair.
func (p *jcsParser) escape() (rune, error) {
	start := p.pos
	if p.pos+1 >= len(p.in) {
		return 0, p.errorf(p.pos, "unterminated string")
	}
	c := p.in[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		return 0, p.errorf(start+1, "invalid escape character %s", jcsDescribe(c))
	}
	r, ok := jcsHex4(p.in[p.pos:])
	if !ok {
		return 0, p.errorf(start, `invalid \u escape`)
	}
	p.pos += 4
	switch {
	case r < 0xd800 || r > 0xdfff:
		return r, nil
	case r >= 0xdc00:
		return 0, p.errorf(start, `lone surrogate \u%04x`, r)
	}
	rest := p.in[p.pos:]
	if len(rest) < 2 || rest[0] != '\\' || rest[1] != 'u' {
		return 0, p.errorf(start, `lone surrogate \u%04x`, r)
	}
	r2, ok := jcsHex4(rest[2:])
	if !ok {
		return 0, p.errorf(p.pos, `invalid \u escape`)
	}
	if r2 < 0xdc00 || r2 > 0xdfff {
		return 0, p.errorf(start, `lone surrogate \u%04x`, r)
	}
	p.pos += 6
	return 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00), nil
}

// jcsHex4 decodes the four hex digits at the start of b.
func jcsHex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendQuoted appends a string quoted read, s with literal lit, in
// canonical form: lit as it is, else s escaped.
func appendQuoted(dst, s, lit []byte) []byte {
	if lit != nil {
		return append(dst, lit...)
	}
	return appendJCSString(dst, s)
}

// appendJCSString appends s, valid UTF-8, as a JSON string according to
// RFC 8785 §3.2.2.2, which is ECMAScript's JSON.stringify.
func appendJCSString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		// Copy the run of bytes that need no escape at once.
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' {
			j++
		}
		dst = append(dst, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		switch c := s[i]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default: // the other control characters; bytes of multi-byte runes are >= 0x80
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(dst, '"')
}

func jcsIsDigit(c int) bool { return '0' <= c && c <= '9' }

// number canonicalizes the number at p.pos, which must follow the strict
// grammar of RFC 8259 §6 (strconv.ParseFloat alone accepts much more).
func (p *jcsParser) number() error {
	start := p.pos
	at := func(i int) int {
		if i < len(p.in) {
			return int(p.in[i])
		}
		return -1
	}
	digits := func(i int) (int, bool) {
		if !jcsIsDigit(at(i)) {
			return i, false
		}
		for jcsIsDigit(at(i)) {
			i++
		}
		return i, true
	}
	i := start
	if at(i) == '-' {
		i++
	}
	var ok bool
	if at(i) == '0' {
		i++
	} else if i, ok = digits(i); !ok {
		return p.errorf(i, "invalid number")
	}
	if at(i) == '.' {
		if i, ok = digits(i + 1); !ok {
			return p.errorf(i, "invalid number")
		}
	}
	if c := at(i); c == 'e' || c == 'E' {
		i++
		if c := at(i); c == '+' || c == '-' {
			i++
		}
		if i, ok = digits(i); !ok {
			return p.errorf(i, "invalid number")
		}
	}
	// Without this, "01" or "1.2.3" would be blamed on what follows the
	// value rather than on the number.
	switch c := at(i); {
	case jcsIsDigit(c), c == '.', c == 'e', c == 'E', c == '+', c == '-':
		return p.errorf(i, "invalid number")
	}
	lit := string(p.in[start:i])
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) { // the grammar leaves only ErrRange
		return p.errorf(start, "number %s out of range", jcsQuote(lit))
	}
	p.pos = i
	p.out = appendJCSNumber(p.out, f)
	return nil
}

// appendJCSNumber appends the finite f as ECMAScript's
// Number.prototype.toString writes it, according to RFC 8785 §3.2.2.3.
func appendJCSNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // and -0 too
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// strconv's shortest round-trip digits are those ECMAScript requires:
	// the fewest digits k, and of those the closest to f. Go writes them
	// as d[.ddd]e±XX; in ECMAScript's terms f = digits × 10^(n-k).
	var ebuf, dbuf [32]byte
	e := strconv.AppendFloat(ebuf[:0], f, 'e', -1, 64)
	x := bytes.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(string(e[x+1:]))
	digits := append(dbuf[:0], e[0])
	if x > 1 {
		digits = append(digits, e[2:x]...) // skip the '.'
	}
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

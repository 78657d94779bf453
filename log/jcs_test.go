package log

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// TestCanonicalizeJCSVectors runs the test vectors of the RFC 8785 author's
// reference implementation, github.com/cyberphone/json-canonicalization
// (testdata/input and testdata/output at commit 19d51d7f), restated byte for
// byte under testdata/jcs.
func TestCanonicalizeJCSVectors(t *testing.T) {
	names := []string{"arrays", "french", "structures", "unicode", "values", "weird"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "jcs", "input", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "jcs", "output", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(in)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Canonicalize:\ngot  %s\nwant %s", got, want)
			}
			if isCanonical(in) {
				t.Errorf("isCanonical(input) = true, want false")
			}
			if !isCanonical(want) {
				t.Errorf("isCanonical(output) = false, want true")
			}
		})
	}
	// Guard against a vector file added but not listed above.
	files, err := filepath.Glob(filepath.Join("testdata", "jcs", "input", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(names) {
		t.Errorf("testdata/jcs/input holds %d files, the test runs %d", len(files), len(names))
	}
}

// jcsAppendixB is the number serialization table of RFC 8785 Appendix B:
// IEEE-754 bit patterns and their canonical text.
var jcsAppendixB = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"}, // round to even
	// The rows for NaN (7fffffffffffffff) and Infinity (7ff0000000000000)
	// have no JSON spelling; TestCanonicalize checks that numbers which
	// overflow to Infinity are rejected.
}

func TestCanonicalizeJCSAppendixB(t *testing.T) {
	for _, tt := range jcsAppendixB {
		f := math.Float64frombits(tt.bits)
		if got := string(appendJCSNumber(nil, f)); got != tt.want {
			t.Errorf("appendJCSNumber(%016x) = %s, want %s", tt.bits, got, tt.want)
		}
		// And through the parser, from Go's spelling of the same double.
		for _, in := range []string{strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'E', 20, 64)} {
			got, err := Canonicalize([]byte(in))
			if err != nil || string(got) != tt.want {
				t.Errorf("Canonicalize(%s) = %s, %v, want %s", in, got, err, tt.want)
			}
		}
	}
}

// TestCanonicalizeJCSNumbersMatchGowebpki compares the number formatter with
// gowebpki/jcs's, which passes the reference implementation's 100 million
// line ES6 number file, on random bit patterns.
func TestCanonicalizeJCSNumbersMatchGowebpki(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 200000
	if testing.Short() {
		n = 10000
	}
	for range n {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatalf("jcs.NumberToJSON(%016x): %v", math.Float64bits(f), err)
		}
		if got := string(appendJCSNumber(nil, f)); got != want {
			t.Errorf("appendJCSNumber(%016x) = %s, gowebpki/jcs says %s", math.Float64bits(f), got, want)
		}
	}
}

func TestCanonicalize(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	tests := []struct {
		name, in, want string
		err            string // the whole error, or a prefix ending in "..."
	}{
		// Layout.
		{name: "scalar", in: "1", want: "1"},
		{name: "surrounding space", in: " \t\r\n[ 1 , 2 ]\n", want: "[1,2]"},
		{name: "empty containers", in: `{ "a" : [ ] , "b" : { } }`, want: `{"a":[],"b":{}}`},
		{name: "literals", in: `[true,false,null]`, want: `[true,false,null]`},
		{name: "array order kept", in: `[3,1,2]`, want: `[3,1,2]`},

		// Sorting by UTF-16 code units (§3.2.3).
		{name: "sort", in: `{"b":1,"a":2,"":3}`, want: `{"":3,"a":2,"b":1}`},
		{name: "sort nested", in: `{"b":{"d":1,"c":2},"a":[{"f":1,"e":2}]}`, want: `{"a":[{"e":2,"f":1}],"b":{"c":2,"d":1}}`},
		{name: "sort prefix", in: `{"ab":1,"a":2}`, want: `{"a":2,"ab":1}`},
		{name: "sort case", in: `{"a":1,"B":2}`, want: `{"B":2,"a":1}`},
		// U+1F600 is D83D DE00 in UTF-16, before U+E000, though it is after
		// it in code point and UTF-8 byte order.
		{name: "sort astral before private use", in: `{"\ue000":1,"\ud83d\ude00":2}`, want: "{\"\U0001F600\":2,\"\ue000\":1}"},
		{name: "sort astral by low surrogate", in: "{\"\U0001F601\":1,\"\U0001F600\":2}", want: "{\"\U0001F600\":2,\"\U0001F601\":1}"},
		{name: "sort escaped key", in: `{"\u0062":1,"a":2}`, want: `{"a":2,"b":1}`},
		{name: "many keys", in: `{"j":0,"i":0,"h":0,"g":0,"f":0,"e":0,"d":0,"c":0,"b":0,"a":0}`, want: `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0}`},

		// Strings (§3.2.2.2).
		{name: "shorthand escapes", in: `"\b\t\n\f\r"`, want: `"\b\t\n\f\r"`},
		{name: "unicode shorthand", in: `"\u0008\u0009\u000A\u000c\u000D"`, want: `"\b\t\n\f\r"`},
		{name: "other controls", in: `"\u0000\u0001\u001F\u000B"`, want: `"\u0000\u0001\u001f\u000b"`},
		{name: "quote and backslash", in: `"\"\\\u0022\u005C"`, want: `"\"\\\"\\"`},
		{name: "solidus", in: `"\/ /"`, want: `"/ /"`},
		{name: "del raw", in: `"\u007f"`, want: "\"\x7f\""},
		{name: "line separators raw", in: `"\u2028\u2029"`, want: "\"\u2028\u2029\""},
		{name: "escaped bmp", in: `"\u20AC\u00e9"`, want: `"€é"`},
		{name: "surrogate pair", in: `"\uD83D\uDE00"`, want: "\"\U0001F600\""},
		{name: "raw utf-8", in: "\"\u00e9\u4e16\U0001F600\"", want: "\"\u00e9\u4e16\U0001F600\""},
		{name: "noncharacter", in: `"\uffff\ufdd0"`, want: "\"\uffff\ufdd0\""},
		{name: "no normalization", in: `"A\u030a"`, want: "\"A\u030a\""},

		// Numbers (§3.2.2.3).
		{name: "minus zero", in: `-0`, want: `0`},
		{name: "minus zero float", in: `-0.0e5`, want: `0`},
		{name: "trailing zeros", in: `[1.0,1.50,100,1e2,1E+2,10e-1]`, want: `[1,1.5,100,100,100,1]`},
		{name: "exponent boundaries", in: `[1e20,1e21,1e-6,1e-7,123e-9,-1e21]`, want: `[100000000000000000000,1e+21,0.000001,1e-7,1.23e-7,-1e+21]`},
		{name: "beyond 2^53", in: `9007199254740993`, want: `9007199254740992`},
		{name: "long mantissa", in: `0.1000000000000000055511151231257827021181583404541015625`, want: `0.1`},
		{name: "underflow", in: `[1e-400,-1e-400]`, want: `[0,0]`},
		{name: "max", in: `1.7976931348623157e308`, want: `1.7976931348623157e+308`},
		{name: "huge exponent zero", in: `0e99999999999999999999`, want: `0`},

		// Nesting.
		{name: "depth 100", in: deep(100, "[", "]"), want: deep(100, "[", "]")},
		{name: "depth 100 objects", in: deep(100, `{"a":`, "}"), want: deep(100, `{"a":`, "}")},
		{name: "depth 101", in: deep(101, "[", "]"), err: "jcs: nesting deeper than 100 at offset 100"},
		{name: "depth 101 objects", in: deep(101, `{"a":`, "}"), err: "jcs: nesting deeper than 100 at offset 500"},
		{name: "depth huge", in: strings.Repeat("[", 1<<20), err: "jcs: nesting deeper than 100 at offset 100"},

		// I-JSON rejections.
		{name: "duplicate key", in: `{"a":1,"b":2,"a":3}`, err: `jcs: duplicate key "a" at offset 13`},
		{name: "duplicate escaped key", in: `{"a":1,"\u0061":2}`, err: `jcs: duplicate key "a" at offset 7`},
		{name: "duplicate key nested", in: `[{"x":{"k":1,"k":2}}]`, err: `jcs: duplicate key "k" at offset 13`},
		{name: "duplicate key many", in: `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"e":1}`, err: `jcs: duplicate key "e" at offset 61`},
		{name: "duplicate key ninth", in: `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"a":1}`, err: `jcs: duplicate key "a" at offset 49`},
		{name: "duplicate before later error", in: `{"a":1,"a":x}`, err: `jcs: duplicate key "a" at offset 7`},
		{name: "duplicate long key", in: `{"` + strings.Repeat("k", 40) + `":1,"` + strings.Repeat("k", 40) + `":2}`, err: `jcs: duplicate key "` + strings.Repeat("k", 32) + `"... at offset 46`},
		{name: "lone high surrogate", in: `"\ud800"`, err: `jcs: lone surrogate \ud800 at offset 1`},
		{name: "lone low surrogate", in: `"x\uDC00"`, err: `jcs: lone surrogate \udc00 at offset 2`},
		{name: "high then ascii", in: `"\ud800\u0041"`, err: `jcs: lone surrogate \ud800 at offset 1`},
		{name: "high then high", in: `"\ud800\ud800"`, err: `jcs: lone surrogate \ud800 at offset 1`},
		{name: "high then text", in: `"\ud800abcdef"`, err: `jcs: lone surrogate \ud800 at offset 1`},
		{name: "high then bad escape", in: `"\ud800\u12"`, err: `jcs: invalid \u escape at offset 7`},
		{name: "invalid utf-8", in: "\"a\xffb\"", err: "jcs: invalid utf-8 at offset 2"},
		{name: "overlong utf-8", in: "\"\xc0\xaf\"", err: "jcs: invalid utf-8 at offset 1"},
		{name: "utf-8 surrogate", in: "\"\xed\xa0\x80\"", err: "jcs: invalid utf-8 at offset 1"},
		{name: "truncated utf-8", in: "\"\xe2\x82\"", err: "jcs: invalid utf-8 at offset 1"},
		{name: "overflow", in: `[1e400]`, err: `jcs: number "1e400" out of range at offset 1`},
		{name: "negative overflow", in: `-1.8e308`, err: `jcs: number "-1.8e308" out of range at offset 0`},
		{name: "long overflow", in: `1` + strings.Repeat("0", 400), err: `jcs: number "1` + strings.Repeat("0", 31) + `"... out of range at offset 0`},

		// Syntax.
		{name: "empty", in: ``, err: "jcs: unexpected end of input, want a value at offset 0"},
		{name: "only space", in: "  \n", err: "jcs: unexpected end of input, want a value at offset 3"},
		{name: "two values", in: `1 2`, err: "jcs: unexpected '2' after top-level value at offset 2"},
		{name: "trailing comma array", in: `[1,]`, err: "jcs: unexpected ']', want a value at offset 3"},
		{name: "trailing comma object", in: `{"a":1,}`, err: "jcs: unexpected '}', want a string key at offset 7"},
		{name: "missing colon", in: `{"a" 1}`, err: "jcs: unexpected '1', want ':' at offset 5"},
		{name: "missing comma", in: `[1 2]`, err: "jcs: unexpected '2', want ',' or ']' at offset 3"},
		{name: "missing brace", in: `{"a":1`, err: "jcs: unexpected end of input, want ',' or '}' at offset 6"},
		{name: "number key", in: `{1:2}`, err: "jcs: unexpected '1', want a string key at offset 1"},
		{name: "single quotes", in: `'a'`, err: `jcs: unexpected '\'', want a value at offset 0`},
		{name: "unterminated string", in: `"abc`, err: "jcs: unterminated string at offset 4"},
		{name: "unterminated escape", in: `"abc\`, err: "jcs: unterminated string at offset 4"},
		{name: "raw newline", in: "\"a\nb\"", err: "jcs: unescaped control character byte 0x0a in string at offset 2"},
		{name: "raw nul", in: "\"\x00\"", err: "jcs: unescaped control character byte 0x00 in string at offset 1"},
		{name: "bad escape", in: `"\x41"`, err: `jcs: invalid escape character 'x' at offset 2`},
		{name: "bad escape byte", in: "\"\\\xff\"", err: `jcs: invalid escape character byte 0xff at offset 2`},
		{name: "bad unicode escape", in: `"\u12g4"`, err: `jcs: invalid \u escape at offset 1`},
		{name: "short unicode escape", in: `"\u12"`, err: `jcs: invalid \u escape at offset 1`},
		{name: "bom", in: "\ufeff1", err: "jcs: unexpected byte 0xef, want a value at offset 0"},
		{name: "comment", in: `[1 /* x */]`, err: "jcs: unexpected '/', want ',' or ']' at offset 3"},
		{name: "bad literal", in: `[tru]`, err: "jcs: invalid literal, want true at offset 1"},
		{name: "literal case", in: `Null`, err: "jcs: unexpected 'N', want a value at offset 0"},
		{name: "literal suffix", in: `nullx`, err: "jcs: unexpected 'x' after top-level value at offset 4"},
		{name: "NaN", in: `NaN`, err: "jcs: unexpected 'N', want a value at offset 0"},
		{name: "Infinity", in: `-Infinity`, err: "jcs: invalid number at offset 1"},
		{name: "leading zero", in: `01`, err: "jcs: invalid number at offset 1"},
		{name: "leading zero negative", in: `-012`, err: "jcs: invalid number at offset 2"},
		{name: "plus sign", in: `+1`, err: "jcs: unexpected '+', want a value at offset 0"},
		{name: "bare minus", in: `-`, err: "jcs: invalid number at offset 1"},
		{name: "dot first", in: `.5`, err: "jcs: unexpected '.', want a value at offset 0"},
		{name: "dot last", in: `1.`, err: "jcs: invalid number at offset 2"},
		{name: "two dots", in: `1.2.3`, err: "jcs: invalid number at offset 3"},
		{name: "empty exponent", in: `1e`, err: "jcs: invalid number at offset 2"},
		{name: "signed empty exponent", in: `1e+`, err: "jcs: invalid number at offset 3"},
		{name: "hex", in: `0x10`, err: "jcs: unexpected 'x' after top-level value at offset 1"},
		{name: "underscore", in: `1_000`, err: "jcs: unexpected '_' after top-level value at offset 1"},
		{name: "number then minus", in: `[1-2]`, err: "jcs: invalid number at offset 2"},
		{name: "non-ascii outside string", in: "[\u00e9]", err: "jcs: unexpected byte 0xc3, want a value at offset 1"},
		{name: "nbsp space", in: "\u00a01", err: "jcs: unexpected byte 0xc2, want a value at offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if tt.err != "" {
				if err == nil {
					t.Fatalf("Canonicalize(%q) = %q, want error %q", tt.in, got, tt.err)
				}
				if err.Error() != tt.err {
					t.Errorf("Canonicalize(%q) error\ngot  %s\nwant %s", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%q)\ngot  %s\nwant %s", tt.in, got, tt.want)
			}
			if !isCanonical(got) {
				t.Errorf("isCanonical(%q) = false", got)
			}
		})
	}
}

func TestIsCanonical(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{`{"a":1,"b":[true,null]}`, true},
		{`"\u001f"`, true},
		{"\"\u20ac\"", true},
		{`0`, true},
		{`1e+21`, true},
		{``, false},
		{` {"a":1}`, false},
		{`{"a":1}` + "\n", false},
		{`{"b":1,"a":2}`, false},
		{`{"a": 1}`, false},
		{`-0`, false},
		{`1.0`, false},
		{`1E+21`, false},
		{`1e21`, false},
		{`"\u001F"`, false},
		{`"\u20ac"`, false},
		{`"\/"`, false},
		{`{"a":1,"a":1}`, false},
	}
	for _, tt := range tests {
		if got := isCanonical([]byte(tt.in)); got != tt.want {
			t.Errorf("isCanonical(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalizeJCSCompareUTF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	runes := []rune{'a', 'b', 0x7f, 0xe9, 0x20ac, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x1f601, 0x10ffff}
	str := func() string {
		var b strings.Builder
		for range r.IntN(4) {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		return b.String()
	}
	for range 20000 {
		a, b := str(), str()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16(a, b); got != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}

// jcsGen writes random JSON texts that are valid I-JSON but far from
// canonical: random whitespace, member order, escapes and number spellings.
type jcsGen struct {
	r *rand.Rand
	b []byte
}

func (g *jcsGen) space() {
	for range g.r.IntN(3) {
		g.b = append(g.b, " \t\n\r"[g.r.IntN(4)])
	}
}

func (g *jcsGen) value(depth int) {
	g.space()
	k := g.r.IntN(10)
	switch {
	case depth == 0 && k >= 4 && g.r.IntN(5) > 0:
		k %= 4 // mostly containers at the top
	case depth >= 6 && k < 4:
		k += 4 // no more containers
	}
	switch k {
	case 0, 1:
		g.b = append(g.b, '{')
		seen := map[string]bool{}
		for i := range g.r.IntN(7) {
			key := g.rawString(3)
			if seen[key] {
				continue
			}
			seen[key] = true
			if i > 0 && len(seen) > 1 {
				g.b = append(g.b, ',')
			}
			g.space()
			g.string(key)
			g.space()
			g.b = append(g.b, ':')
			g.value(depth + 1)
		}
		g.space()
		g.b = append(g.b, '}')
	case 2, 3:
		g.b = append(g.b, '[')
		for i := range g.r.IntN(5) {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.value(depth + 1)
		}
		g.space()
		g.b = append(g.b, ']')
	case 4, 5:
		g.string(g.rawString(8))
	case 6, 7, 8:
		g.number()
	default:
		g.b = append(g.b, []string{"true", "false", "null"}[g.r.IntN(3)]...)
	}
	g.space()
}

// rawString returns up to n random characters, biased to the ones that
// JCS escapes or sorts specially.
func (g *jcsGen) rawString(n int) string {
	var s []rune
	for range g.r.IntN(n + 1) {
		var c rune
		switch g.r.IntN(9) {
		case 0:
			c = rune(g.r.IntN(0x20))
		case 1:
			c = []rune{'"', '\\', '/', 0x7f, 0x2028, 0x2029, 0xfeff, 0xfffd, 0xffff}[g.r.IntN(9)]
		case 2:
			c = 0x80 + rune(g.r.IntN(0x800-0x80))
		case 3:
			c = 0x800 + rune(g.r.IntN(0xd800-0x800))
		case 4:
			c = 0xe000 + rune(g.r.IntN(0x10000-0xe000))
		case 5:
			c = 0x10000 + rune(g.r.IntN(0x110000-0x10000))
		default:
			c = 'a' + rune(g.r.IntN(4)) // short keys collide and share prefixes
		}
		s = append(s, c)
	}
	return string(s)
}

func (g *jcsGen) hex4(r rune) {
	f := "\\u%04x"
	if g.r.IntN(2) == 0 {
		f = "\\u%04X"
	}
	g.b = fmt.Appendf(g.b, f, r)
}

var jcsShortEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

func (g *jcsGen) string(s string) {
	g.b = append(g.b, '"')
	for _, c := range s {
		short := jcsShortEscapes[c]
		switch {
		case short != "" && g.r.IntN(2) == 0:
			g.b = append(g.b, short...)
		case c < 0x20 || c == '"' || c == '\\' || g.r.IntN(4) == 0:
			if c >= 0x10000 {
				hi, lo := utf16.EncodeRune(c)
				g.hex4(hi)
				g.hex4(lo)
			} else {
				g.hex4(c)
			}
		default:
			g.b = utf8.AppendRune(g.b, c)
		}
	}
	g.b = append(g.b, '"')
}

func (g *jcsGen) number() {
	switch g.r.IntN(6) {
	case 0:
		g.b = strconv.AppendInt(g.b, g.r.Int64N(2_000_001)-1_000_000, 10)
	case 1: // any finite double, in one of Go's spellings
		f := math.Float64frombits(g.r.Uint64())
		for math.IsNaN(f) || math.IsInf(f, 0) {
			f = math.Float64frombits(g.r.Uint64())
		}
		g.b = strconv.AppendFloat(g.b, f, "eEg"[g.r.IntN(3)], -1, 64)
	case 2: // a double with more digits than it needs
		f := g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(60)-30))
		g.b = strconv.AppendFloat(g.b, f, 'e', 17+g.r.IntN(10), 64)
	case 3: // a decimal with a small exponent, near the boundaries of the fixed form
		g.b = strconv.AppendInt(g.b, g.r.Int64N(1_000_000)-500_000, 10)
		if g.r.IntN(2) == 0 {
			g.b = append(g.b, '.')
			g.b = strconv.AppendInt(g.b, g.r.Int64N(1000), 10)
		}
		g.b = fmt.Appendf(g.b, "e%+d", g.r.IntN(60)-30)
	case 4:
		g.b = append(g.b, []string{"-0", "0.0", "-0e0", "1e-400", "5e-324", "1.7976931348623157e308", "9007199254740993", "1E21", "999999999999999999999", "0.000001", "0.0000001"}[g.r.IntN(11)]...)
	default: // an integral float
		g.b = strconv.AppendFloat(g.b, math.Trunc(g.r.NormFloat64()*1e6), 'f', 1+g.r.IntN(3), 64)
	}
}

// TestCanonicalizeMatchesGowebpki cross-checks Canonicalize against
// github.com/gowebpki/jcs on random documents. Both must accept every one of
// them and agree byte for byte.
//
// The two differ on purpose in what they reject, which this test does not
// generate: gowebpki/jcs allows nesting 10000 deep where Canonicalize stops at
// 100, and it reports errors without offsets.
func TestCanonicalizeMatchesGowebpki(t *testing.T) {
	g := &jcsGen{r: rand.New(rand.NewPCG(5, 6))}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		g.b = g.b[:0]
		g.value(0)
		in := g.b
		got, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", in, err)
		}
		want, err := jcs.Transform(in)
		if err != nil {
			t.Fatalf("jcs.Transform(%q): %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonicalize(%q)\ngot           %s\ngowebpki/jcs %s", in, got, want)
		}
		if !isCanonical(got) {
			t.Fatalf("isCanonical(%q) = false", got)
		}
		if err := jcsSameJSON(in, got); err != nil {
			t.Fatalf("Canonicalize(%q) = %q: %v", in, got, err)
		}
	}
}

// jcsSameJSON reports whether a and b decode, with encoding/json, to the
// same value, comparing numbers as float64s.
func jcsSameJSON(a, b []byte) error {
	decode := func(data []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, err := decode(a)
	if err != nil {
		return fmt.Errorf("decoding input: %v", err)
	}
	vb, err := decode(b)
	if err != nil {
		return fmt.Errorf("decoding output: %v", err)
	}
	return jcsSameValue(va, vb)
}

func jcsSameValue(a, b any) error {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return fmt.Errorf("object %v became %v", a, b)
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok {
				return fmt.Errorf("key %q lost", k)
			}
			if err := jcsSameValue(va, vb); err != nil {
				return err
			}
		}
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return fmt.Errorf("array %v became %v", a, b)
		}
		for i := range a {
			if err := jcsSameValue(a[i], b[i]); err != nil {
				return err
			}
		}
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return fmt.Errorf("number %v became %v", a, b)
		}
		fa, erra := strconv.ParseFloat(string(a), 64)
		fb, errb := strconv.ParseFloat(string(b), 64)
		if erra != nil || errb != nil || fa != fb {
			return fmt.Errorf("number %v became %v", a, b)
		}
	default: // string, bool, nil
		if a != b {
			return fmt.Errorf("%#v became %#v", a, b)
		}
	}
	return nil
}

func FuzzCanonicalize(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "jcs", "*", "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
		`[1e21,1e-7,-0,0.1,123456789012345678901234567890]`,
		`"\ud83d\ude00\u0000\u001f\u2028\\\"\/"`,
		`{"\ue000":1,"\ud83d\ude00":2,"a":{"b":3,"a":4}}`,
		`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `1e400`, `[[[[[]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if out != nil {
				t.Fatalf("Canonicalize(%q) returned output with error %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("Canonicalize(%q) accepted input encoding/json rejects", in)
		}
		if !json.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q, not valid JSON", in, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize(%q) = %q, not canonical: %q, %v", in, out, again, err)
		}
		if err := jcsSameJSON(in, out); err != nil {
			t.Fatalf("Canonicalize(%q) = %q: %v", in, out, err)
		}
		// Where gowebpki/jcs accepts the input too, it must agree.
		if want, err := jcsTransform(in); err == nil && !bytes.Equal(out, want) {
			t.Fatalf("Canonicalize(%q)\ngot           %q\ngowebpki/jcs %q", in, out, want)
		}
	})
}

// jcsTransform calls gowebpki/jcs, turning a panic into an error: a fault in
// the oracle is not a fault in Canonicalize.
func jcsTransform(in []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return jcs.Transform(in)
}

func BenchmarkCanonicalize(b *testing.B) {
	g := &jcsGen{r: rand.New(rand.NewPCG(7, 8))}
	for len(g.b) < 1<<16 {
		g.b = append(g.b, ',')
		g.value(0)
	}
	g.b[0] = '['
	random := append(g.b, ']')
	canonical, err := Canonicalize(random)
	if err != nil {
		b.Fatal(err)
	}
	// Worst case for copying: every object is unsorted and nested as deep
	// as allowed, so the payload is permuted once per level.
	payload := `"` + strings.Repeat("x", 1<<16) + `"`
	deep := strings.Repeat(`{"b":0,"a":`, maxJCSDepth) + payload + strings.Repeat("}", maxJCSDepth)
	for _, bb := range []struct {
		name string
		in   []byte
	}{
		{"random", random},
		{"canonical", canonical},
		{"deep-unsorted", []byte(deep)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Canonicalize(bb.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

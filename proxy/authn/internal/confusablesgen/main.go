// Command confusablesgen writes package authn's table of look-alike
// characters, confusables_table.go, from Unicode's confusables.txt (UTS
// #39, Unicode Security Mechanisms, https://www.unicode.org/reports/tr39/).
//
// The data is vendored beside this file, in part: confusables.txt here
// holds the published file's header and those of its lines whose
// target is printable ASCII, or U+00B7 MIDDLE DOT. An actor id reads as
// provlog's own only through characters that pass for the ASCII of
// "provlog.", and a mapping to anything else gives a character that is
// none of them: the other six thousand mappings (between letters of
// other scripts, CJK components, marks) could never make an id read as
// provlog's, and would cost the binary their room. The middle dot's
// lines are kept because provlog reads that dot, and every character
// Unicode takes for it, as the namespace's full stop.
//
// From proxy/authn, with the vendored lines:
//
//	go generate
//
// To move to a new version of the data, fetch the whole file and let
// this program take its lines (it rewrites the vendored file, then the
// table):
//
//	go run ./internal/confusablesgen -subset /path/to/confusables.txt
//
// The table maps each character to its skeleton in lower-case ASCII
// (see skeletons), so that the lookup at run time is all there is to
// it. TestTableCurrent, beside this file, fails when the table is
// not what the vendored data gives.
package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

func main() {
	data := flag.String("data", "internal/confusablesgen/confusables.txt", "the vendored lines of confusables.txt")
	out := flag.String("o", "confusables_table.go", "the Go file to write")
	subset := flag.String("subset", "", "a whole confusables.txt whose lines replace the vendored ones first")
	flag.Parse()
	if err := run(*data, *out, *subset); err != nil {
		fmt.Fprintln(os.Stderr, "confusablesgen:", err)
		os.Exit(1)
	}
}

func run(dataPath, outPath, subsetPath string) error {
	if subsetPath != "" {
		whole, err := os.ReadFile(subsetPath)
		if err != nil {
			return err
		}
		part, err := subset(whole)
		if err != nil {
			return fmt.Errorf("%s: %w", subsetPath, err)
		}
		if err := os.WriteFile(dataPath, part, 0o644); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(dataPath)
	if err != nil {
		return err
	}
	src, err := generate(data)
	if err != nil {
		return fmt.Errorf("%s: %w", dataPath, err)
	}
	return os.WriteFile(outPath, src, 0o644)
}

// A mapping is one line of confusables.txt: from is confusable with the
// string to, its prototype.
type mapping struct {
	from rune
	to   []rune
}

// middleDot is U+00B7 MIDDLE DOT, the prototype of the middle dots.
const middleDot = '\u00b7'

// keep reports whether a mapping's line belongs in the vendored part:
// its target is printable ASCII, or the middle dot.
func keep(to []rune) bool {
	if len(to) == 1 && to[0] == middleDot {
		return true
	}
	for _, r := range to {
		if r < '!' || r > '~' {
			return false
		}
	}
	return true
}

// note follows the published header in the vendored file.
const note = `# provlog: an excerpt. Only the lines whose target is printable ASCII, or
# U+00B7 MIDDLE DOT, are kept (proxy/authn/internal/confusablesgen -subset
# chose them); they, and the header above, are as published, less the
# byte order mark the file starts with. The Unicode License V3 that covers
# them is in LICENSE-UNICODE beside this file.
#
`

// subset returns the vendored part of a whole confusables.txt: its
// header (the comment lines before the first mapping, without the byte
// order mark), the note, and the lines keep takes, unchanged.
func subset(whole []byte) ([]byte, error) {
	var head, body bytes.Buffer
	inHeader := true
	n := 0
	for i, line := range strings.Split(strings.TrimPrefix(string(whole), "\ufeff"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if inHeader && strings.HasPrefix(line, "#") {
			head.WriteString(line + "\n")
			continue
		}
		inHeader = false
		m, ok, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if ok && keep(m.to) {
			body.WriteString(line + "\n")
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("no mapping to ASCII: not confusables.txt")
	}
	return append(append(head.Bytes(), note...), body.Bytes()...), nil
}

// parse reads the vendored file: the data's version (from its header's
// "# Version: " line) and its mappings.
func parse(data []byte) (version string, ms []mapping, err error) {
	for i, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "# Version: "); ok && version == "" {
			version = strings.TrimSpace(v)
		}
		m, ok, err := parseLine(line)
		if err != nil {
			return "", nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if ok {
			ms = append(ms, m)
		}
	}
	if version == "" {
		return "", nil, errors.New(`no "# Version: " line`)
	}
	return version, ms, nil
}

// parseLine reads one line of confusables.txt, "0440 ;\t0070 ;\tMA\t# ( р → p ) CYRILLIC ...",
// and false if it is a comment or blank.
func parseLine(line string) (mapping, bool, error) {
	fields, _, _ := strings.Cut(line, "#")
	if strings.TrimSpace(fields) == "" {
		return mapping{}, false, nil
	}
	f := strings.Split(fields, ";")
	if len(f) != 3 || strings.TrimSpace(f[2]) != "MA" {
		return mapping{}, false, fmt.Errorf("want \"source ; target ; MA\", got %q", fields)
	}
	from, err := codePoints(f[0])
	if err != nil || len(from) != 1 {
		return mapping{}, false, fmt.Errorf("source %q: want one code point", f[0])
	}
	to, err := codePoints(f[1])
	if err != nil || len(to) == 0 {
		return mapping{}, false, fmt.Errorf("target %q: want code points", f[1])
	}
	return mapping{from: from[0], to: to}, true, nil
}

func codePoints(s string) ([]rune, error) {
	var rs []rune
	for _, h := range strings.Fields(s) {
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil || v > utf8.MaxRune {
			return nil, fmt.Errorf("bad code point %q", h)
		}
		rs = append(rs, rune(v))
	}
	return rs, nil
}

// An addition is a character provlog reads as a character of its
// namespace where Unicode's data does not, or not as that one. The dots
// read as the full stop of "provlog." to a person, and the namespace's
// dot is the one place a reader scans for; refusing an id for one of
// them costs its owner little.
type addition struct {
	from rune
	to   string
}

var additions = []addition{
	// MIDDLE DOT: the namespace's full stop, as is every dot of its
	// class (the data's lines that map to it).
	{middleDot, "."},
	// IDEOGRAPHIC FULL STOP: Unicode's prototype is U+02F3 MODIFIER
	// LETTER LOW RING.
	{'\u3002', "."},
	// ARABIC FULL STOP: Unicode's prototype is HYPHEN-MINUS.
	{'\u06d4', "."},
	// BOX DRAWINGS LIGHT VERTICAL. The skeleton takes NFKD before the
	// table, and NFKD makes U+FFE8 HALFWIDTH FORMS LIGHT VERTICAL, which
	// the data reads as l, into this one; without the row it would read
	// as itself.
	{'\u2502', "l"},
	// Small capitals of the letters of "provlog" that the data takes for
	// no ASCII letter (its prototypes for them are other small capitals):
	// "ᴘʀᴏᴠʟᴏɢ" reads as PROVLOG, and ᴏ and ᴠ are the data's o and v.
	{'\u1d18', "p"}, // LATIN LETTER SMALL CAPITAL P
	{'\u0280', "r"}, // LATIN LETTER SMALL CAPITAL R
	{'\u029f', "l"}, // LATIN LETTER SMALL CAPITAL L
	{'\u0262', "g"}, // LATIN LETTER SMALL CAPITAL G
}

// An entry is one row of the generated table.
type entry struct {
	from rune
	to   string
}

// skeletons turns the mappings into the table: each character's
// skeleton in lower-case ASCII, in code point order.
//
// The data maps to prototypes, and a prototype is mapped no further,
// which is checked here. Case is the only thing left: the skeleton at
// run time folds case, so a target's capitals are made small here, and
// one of them, folded, can be a source again ("M" is "m", whose
// prototype is "rn"); it is mapped once more, and a prototype's
// characters, folded, must then be left alone. A target of U+00B7 is
// the full stop (see additions).
func skeletons(ms []mapping) ([]entry, error) {
	proto := make(map[rune][]rune, len(ms))
	for _, m := range ms {
		if _, dup := proto[m.from]; dup {
			return nil, fmt.Errorf("U+%04X is mapped twice", m.from)
		}
		proto[m.from] = m.to
	}
	for _, m := range ms {
		for _, r := range m.to {
			if _, ok := proto[r]; ok {
				return nil, fmt.Errorf("U+%04X maps to U+%04X, which is itself mapped: not a prototype", m.from, r)
			}
		}
	}
	skeleton := func(to []rune) (string, error) {
		if len(to) == 1 && to[0] == middleDot {
			return ".", nil
		}
		var b strings.Builder
		for _, r := range to {
			r = asciiLower(r)
			if p, ok := proto[r]; ok {
				for _, q := range p {
					if _, again := proto[asciiLower(q)]; again || q > '~' {
						return "", fmt.Errorf("%q: folded, its prototype %q maps again", string(to), string(p))
					}
					b.WriteRune(asciiLower(q))
				}
				continue
			}
			if r < '!' || r > '~' {
				return "", fmt.Errorf("target %q is not printable ASCII", string(to))
			}
			b.WriteRune(r)
		}
		return b.String(), nil
	}
	byFrom := make(map[rune]entry, len(ms)+len(additions))
	for _, m := range ms {
		s, err := skeleton(m.to)
		if err != nil {
			return nil, fmt.Errorf("U+%04X: %w", m.from, err)
		}
		byFrom[m.from] = entry{m.from, s}
	}
	for _, a := range additions {
		byFrom[a.from] = entry{a.from, a.to}
	}
	es := make([]entry, 0, len(byFrom))
	for _, e := range byFrom {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.from, b.from) })
	return es, nil
}

func asciiLower(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// rowsPerLine is how many rows of the table share a line of Go.
const rowsPerLine = 5

// generate returns the Go source of the table the vendored data gives.
func generate(data []byte) ([]byte, error) {
	version, ms, err := parse(data)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if !keep(m.to) {
			return nil, fmt.Errorf("U+%04X: a target that is neither printable ASCII nor U+00B7; refresh the data with -subset", m.from)
		}
	}
	es, err := skeletons(ms)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `// Code generated by confusablesgen from Unicode's confusables.txt %s; DO NOT EDIT.

package authn

// confusablesVersion is the version of Unicode's confusables.txt (UTS
// #39) that [confusables] was made from.
const confusablesVersion = %q

// confusables maps each character that Unicode's confusables.txt takes
// for printable ASCII, or for the middle dot, to its skeleton in
// lower-case ASCII, with provlog's additions; in code point order, for
// a binary search. Made by internal/confusablesgen from the lines
// vendored beside it.
var confusables = [...]confusable{
`, version, version)
	// Several rows to a line keep the file within the house's length for
	// a file; the rows' names are in the vendored data, by code point.
	for i, e := range es {
		sep := " "
		if i%rowsPerLine == 0 {
			sep = "\t"
		}
		fmt.Fprintf(&b, "%s{0x%04X, %s},", sep, e.from, strconv.Quote(e.to))
		if i%rowsPerLine == rowsPerLine-1 || i == len(es)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

package proxy

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Case variants of a redacted value.
//
// A server may echo a value in another case than it was sent in (one
// that upper-cases its input, a case-insensitive file system's name):
// S3CRET-Up1 back as S3CRET-UP1. The scrubbers find a value in a text
// under Unicode simple case folding (each character as the least of the
// characters it folds with: k, K and the Kelvin sign are one), whatever
// the server's redact_ignore_case: ASCII's and every other script's
// simple cases, not full folding (ß is not ss). A value encoded as
// base64 is found with its ASCII letters in any mix of cases (coreFilter)
// and its other letters in the case it was sent in, upper-cased or
// lower-cased (encodedCases): a text's base64 is not decoded unless it
// holds the encoding of one of those, so read.

// foldCase returns s with each character folded (foldRune), and, if that
// changed the length of any, at: for each byte of the folded text, the
// offset in s of the character it is of, and len(s) after the last (nil:
// each at its own offset). Bytes that are not UTF-8 are kept as they
// are. It is linear in s, and allocates nothing for a text of ASCII with
// no lower-case letter.
func foldCase(s string) (string, []int) {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf && (s[i] < 'a' || s[i] > 'z') {
		i++
	}
	if i == len(s) {
		return s, nil
	}
	b := []byte(s)
	for ; i < len(b) && b[i] < utf8.RuneSelf; i++ {
		if c := b[i]; 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	if i == len(b) {
		return string(b), nil
	}
	b = b[:i]
	var at []int
	// A text's characters not ASCII are few, and come again: each is
	// folded once, not each time (foldRune searches Unicode's tables).
	var seen [64]struct{ r, f rune }
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			if at != nil {
				at = append(at, i)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		from := len(b)
		if r == utf8.RuneError && n == 1 {
			b = append(b, c)
		} else {
			e := &seen[r&63]
			if e.r != r {
				e.r, e.f = r, foldRune(r)
			}
			b = utf8.AppendRune(b, e.f)
		}
		if at == nil && len(b)-from != n {
			// So far each character folded to as many bytes.
			at = make([]int, 0, len(s)+1)
			for k := 0; k < from; {
				_, m := utf8.DecodeRuneInString(s[k:])
				for range m {
					at = append(at, k)
				}
				k += m
			}
		}
		for range len(b) - from {
			if at != nil {
				at = append(at, i)
			}
		}
		i += n
	}
	if at != nil {
		at = append(at, len(s))
	}
	return string(b), at
}

// foldRune returns the least of the characters r folds with under
// Unicode simple case folding (at most four).
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// folded returns each of secrets folded (foldCase).
func folded(secrets []string) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i], _ = foldCase(s)
	}
	return out
}

// indexFolded returns the index of x in s, both folded (foldCase), or -1.
// A folded text holds upper-case letters wherever its source held either
// case, so x's first letter would start a comparison at nearly every
// word: the search starts at x's first byte that is no letter (a digit,
// a sign, a byte of a character not ASCII), rarer in most texts, and
// checks what comes before it.
func indexFolded(s, x string) int { return indexFoldedWork(s, x, nil) }

// maxSkipSearch is the longest x indexFolded finds by the search above:
// each candidate costs a comparison of at most this many bytes. A longer
// one (a client's redacted value can be megabytes) is found by
// indexLinear: a text repeating all of x but its capitals made the search
// above, and strings.Index itself on a periodic text, compare a whole x
// at every few bytes, work growing with len(s)·len(x).
const maxSkipSearch = 64

// indexFoldedWork is indexFolded that adds to *work, if work is not nil,
// the bytes its searches may look at: each strings.Index the bytes it
// passes over and those of the match it compares, indexLinear its steps
// (the count TestIndexFoldedLinear holds to the text's length).
func indexFoldedWork(s, x string, work *int) int {
	add := func(n int) {
		if work != nil {
			*work += n
		}
	}
	if len(x) > maxSkipSearch {
		return indexLinear(s, x, work)
	}
	k := 0
	for k < len(x) && 'A' <= x[k] && x[k] <= 'Z' {
		k++
	}
	if k == len(x) {
		add(len(s))
		return strings.Index(s, x)
	}
	for from := 0; from+len(x) <= len(s); {
		j := strings.Index(s[from+k:], x[k:])
		if j < 0 {
			add(len(s) - from - k)
			return -1
		}
		add(j + len(x) - k)
		if at := from + j; s[at:at+k] == x[:k] {
			return at
		}
		from += j + 1
	}
	return -1
}

// indexLinear returns the index of x in s, or -1, in steps linear in
// len(s)+len(x) whatever the two hold (Knuth, Morris and Pratt's search:
// no byte of s is compared again after a mismatch), adding its steps to
// *work if work is not nil. Its table holds an int32 for each byte of x.
func indexLinear(s, x string, work *int) int {
	if len(x) == 0 {
		return 0
	}
	if len(x) > len(s) {
		return -1 // no table for a text that cannot hold x (a line of stderr)
	}
	steps := 0
	defer func() {
		if work != nil {
			*work += steps
		}
	}()
	// next[i]: the length of the longest proper prefix of x[:i+1] that
	// is also its suffix.
	next := make([]int32, len(x))
	for i, k := 1, int32(0); i < len(x); i++ {
		for k > 0 && x[i] != x[k] {
			k = next[k-1]
			steps++
		}
		if x[i] == x[k] {
			k++
		}
		next[i] = k
		steps++
	}
	k := int32(0)
	for i := 0; i < len(s); i++ {
		for k > 0 && s[i] != x[k] {
			k = next[k-1]
			steps++
		}
		if s[i] == x[k] {
			k++
		}
		steps++
		if int(k) == len(x) {
			return i + 1 - len(x)
		}
	}
	return -1
}

// encodedCases returns the secrets of at least minSecretLen bytes as
// sent, upper-cased and lower-cased (each once): the forms whose base64
// the scrubbers look for (base64Cores). A server that changes a value's
// case before it encodes it (a token made of it, an image of it) may
// change any of its ASCII letters' cases, which coreFilter reads past;
// the letters beyond ASCII whose cases differ in more than one bit are
// found whole in each case.
func encodedCases(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		for _, c := range []string{s, strings.ToUpper(s), strings.ToLower(s)} {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Base64 of a value with its letters' cases mixed.
//
// An ASCII letter's cases differ in one bit (0x20), as do most Latin-1
// letters' second bytes in UTF-8, and that bit of each byte of a value
// falls in one of base64's characters at a place fixed by where the byte
// is in its group of three: the fourth bit (from the least) of a group's
// first character, the second of its second and the sixth of its
// fourth; its third holds none. A base64 character read with those
// three bits cleared (caseBlind) is the same whichever case each letter
// of the value was in: s3CrEt-uP1's base64 is S3CRET-UP1's so read. The
// scrubbers look for a value's cores (base64Cores) so read, in one pass
// over a text however many values it has (coreFilter), and decode a run
// holding one to match it case-folded: every mix of an ASCII value's
// cases is found, as a value's characters beyond ASCII are found as
// sent, upper- or lower-cased (encodedCases).

// caseBlind maps a base64 character (of either alphabet of
// base64Alphabets) to its six bits without the three a letter's case
// may change, as one of 8 symbols, and any other byte to noBase64.
var caseBlind = func() (t [256]byte) {
	const std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range t {
		t[i] = noBase64
	}
	for v := range 64 {
		sym := byte(v&1 | v>>1&2 | v>>2&4) // bits 0, 2 and 4
		t[std[v]] = sym
	}
	t['-'], t['_'] = t['+'], t['/']
	return t
}()

const noBase64 = 0xff

// coreFilter finds, in one pass over a text, whether it holds any of a
// set of base64 cores read case-blind (caseBlind): each run of the text's
// last w base64 characters is looked up in a set of bits by its symbols'
// hash, and only a hit compares the cores' first w symbols there. A core
// longer than that is then looked for in the rest of the text by
// Knuth, Morris and Pratt's search, once a text: compared in full at each
// hit, a core of a long value (a client may send megabytes) cost
// len(text)·len(value) in a periodic text, where nearly every place hits.
type coreFilter struct {
	cores [][]byte // case-blind symbols
	keys  []uint64 // each core's first w symbols, as hash reads them
	w     int      // the shortest core's length, at most 21 (3 bits a symbol)
	bits  [1 << 14 / 64]uint64
}

// newCoreFilter returns the filter of cores, or nil if there are none.
// from drops each core's first characters (mayHoldSecret's unwrapped
// text).
func newCoreFilter(cores []string, from int) *coreFilter {
	f := &coreFilter{w: 21}
	size := 0
	for _, c := range cores {
		size += max(0, len(c)-from)
	}
	// A value's cases' cores read alike are compared alike (a hit is
	// rare): no search for them to keep each once.
	all := make([]byte, 0, size)
	for _, c := range cores {
		if len(c) <= from {
			continue
		}
		n := len(all)
		for i := from; i < len(c); i++ {
			all = append(all, caseBlind[c[i]])
		}
		f.cores = append(f.cores, all[n:len(all):len(all)])
		f.w = min(f.w, len(c)-from)
	}
	if len(f.cores) == 0 {
		return nil
	}
	f.keys = make([]uint64, len(f.cores))
	for i, c := range f.cores {
		var key uint64
		for _, sym := range c[:f.w] {
			key = key<<3 | uint64(sym)
		}
		f.keys[i] = key
		h := f.hash(key)
		f.bits[h/64] |= 1 << (h % 64)
	}
	return f
}

// kmpTable returns, for each i, the length of the longest proper prefix
// of x[:i+1] that is also its suffix.
func kmpTable(x []byte) []int32 {
	next := make([]int32, len(x))
	for i, k := 1, int32(0); i < len(x); i++ {
		for k > 0 && x[i] != x[k] {
			k = next[k-1]
		}
		if x[i] == x[k] {
			k++
		}
		next[i] = k
	}
	return next
}

// coreSet is a set of secrets' cores (base64Cores) and their filters,
// made once for a set of secrets (a scrubJSON's, an actor's recent ones,
// a server's credentials) and read by each text scrubbed of it: made for
// each text, a filter (2 KiB of bits, each core's symbols) cost more than
// a short text's scan.
type coreSet struct {
	cores []string
	f     *coreFilter // newCoreFilter(cores, 0)
	once  sync.Once
	f1    *coreFilter // newCoreFilter(cores, 1), made when first needed
}

// newCoreSet returns the set of cores.
func newCoreSet(cores []string) *coreSet {
	return &coreSet{cores: cores, f: newCoreFilter(cores, 0)}
}

// filter returns the set's filter of its cores (nil for none).
func (c *coreSet) filter() *coreFilter {
	if c == nil {
		return nil
	}
	return c.f
}

// unwrappedFilter returns the set's filter of its cores without their
// first characters (mayHoldSecret's unwrapped text).
func (c *coreSet) unwrappedFilter() *coreFilter {
	if c == nil {
		return nil
	}
	c.once.Do(func() { c.f1 = newCoreFilter(c.cores, 1) })
	return c.f1
}

// hash is the bit of the set for a run's symbols.
func (f *coreFilter) hash(key uint64) uint64 { return key * 0x9e3779b97f4a7c15 >> (64 - 14) }

// holdsCore reports whether s holds one of f's cores, read case-blind.
// It is linear in s: a hit compares each core's first w symbols (a
// text's runs hit by chance about once in 340 characters for 48 cores),
// and a core longer than that whose first symbols are there is looked
// for in the rest of s once (blindIndex).
func holdsCore[T ~string | ~[]byte](f *coreFilter, s T) bool { return holdsCoreWork(f, s, nil) }

// holdsCoreWork is holdsCore that adds to *work, if work is not nil, the
// bytes of s it reads, the cores it compares at a hit and blindIndex's
// steps (the count TestHoldsCoreLinear holds to the text's length).
func holdsCoreWork[T ~string | ~[]byte](f *coreFilter, s T, work *int) bool {
	if f == nil {
		return false
	}
	if work != nil {
		*work += len(s)
	}
	mask := uint64(1)<<(3*f.w) - 1
	var key uint64
	var searched []bool // the long cores looked for in the rest of s
	n := 0              // base64 characters ending at i, up to w
	for i := 0; i < len(s); i++ {
		sym := caseBlind[s[i]]
		if sym == noBase64 {
			n = 0
			continue
		}
		key = (key<<3 | uint64(sym)) & mask
		if n < f.w {
			n++
		}
		if n < f.w {
			continue
		}
		h := f.hash(key)
		if f.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		start := i + 1 - f.w
		if work != nil {
			*work += len(f.cores)
		}
		for k, c := range f.cores {
			if f.keys[k] != key {
				continue
			}
			if len(c) == f.w {
				return true
			}
			if searched == nil {
				searched = make([]bool, len(f.cores))
			}
			if searched[k] || start+len(c) > len(s) {
				continue // not in s after the place first looked from, or no room for it (a line of stderr)
			}
			searched[k] = true
			if blindIndex(s[start:], c, work) {
				return true
			}
		}
	}
	return false
}

// blindIndex reports whether s, read case-blind, holds the case-blind
// symbols c, in steps linear in s and c (Knuth, Morris and Pratt's
// search), adding them to *work if work is not nil. Its table (an int32
// for each symbol of c) is made here: a core's first symbols are in a
// text rarely, and a filter made for every set of secrets holds none.
func blindIndex[T ~string | ~[]byte](s T, c []byte, work *int) bool {
	next := kmpTable(c)
	steps := len(c)
	defer func() {
		if work != nil {
			*work += steps
		}
	}()
	k := int32(0)
	for i := 0; i < len(s); i++ {
		sym := caseBlind[s[i]]
		for k > 0 && sym != c[k] {
			k = next[k-1]
			steps++
		}
		if sym == c[k] {
			k++
		}
		steps++
		if int(k) == len(c) {
			return true
		}
	}
	return false
}

package authn

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/provlog/provlog/log"
)

// ReservedActor reports whether id is provlog's own (log.ReservedActor)
// or reads as it: whether its skeleton is log.GenesisActor, or begins
// with log.ActorNamespace. The skeleton is what a reader, or a tool that
// normalises text, takes the id for: compatibility forms made plain
// (fullwidth letters, U+2024 ONE DOT LEADER), any case, no accents or
// characters that do not show, every character Unicode's confusables
// data (UTS #39) takes for an ASCII one read as it (Cyrillic о,
// Devanagari ० and the digit 0 as o; capital I, the digit 1 and
// Cyrillic ӏ as l), and every dot provlog takes for the namespace's
// (U+3002 IDEOGRAPHIC FULL STOP, the middle dots) as that. So
// "prоvlog.x" and "pro\u200bvlog.x" are reserved and "provlog-bot",
// "provlogger" and "provlog:alice" are not. Only the skeleton's first
// eight characters are compared, and only with "provlog" and
// "provlog.": an id in another script is never refused for what its
// own letters look like. It lives here, where ids come in, rather than
// in package log, whose verifier's core takes no Unicode tables.
//
// It reads id once and stops at the skeleton's eighth character, so its
// work is linear in len(id); [CheckActor] calls it only on ids within
// its limit.
func ReservedActor(id string) bool {
	if log.ReservedActor(id) {
		return true
	}
	skel, _ := skeletonPrefix(id, len(log.ActorNamespace))
	return skel == log.GenesisActor || skel == log.ActorNamespace
}

// CheckActor is log.CheckActor, which also refuses an id that reads as
// the sidecar's own ([ReservedActor]): every actor id a config, a token
// or a handoff names is checked with it.
func CheckActor(id string, max int) error {
	if err := log.CheckActor(id, max); err != nil {
		return err
	}
	if ReservedActor(id) {
		return fmt.Errorf("actor id %q looks like one of the sidecar's own: read as a person or a normalising tool reads it (look-alike letters and dots as ASCII, in any case, without accents or characters that do not show), it is %q or begins %q, which name the entries provlog writes itself; choose an id that does not read as one of them", id, log.GenesisActor, log.ActorNamespace)
	}
	return nil
}

// skeletonPrefix returns the first n characters of id's skeleton, the
// form in which two ids a reader could take for each other are equal,
// and work, the bytes of normalised text it read to find them.
//
// The skeleton is UTS #39's (NFD, each character replaced by its
// prototype in Unicode's confusables.txt, NFD again), with what an
// actor id needs besides: NFKD rather than NFD, case folded, and
// without the characters that do not show ([log.Invisible]) and the
// combining marks the data does not map; each character is mapped by
// [appendSkeleton]. NFKD rather than NFKC: composing puts a mark back
// inside its letter ("o" and U+0301 become "ó"), where it can no longer
// be dropped, and an id's composed and decomposed spellings are the
// same text to Unicode and must be judged alike. Its compatibility
// mappings make fullwidth and mathematical letters, U+2024 and U+FF0E
// ASCII before the table is consulted. UTS #39's second NFD has nothing
// to do: what the table gives is ASCII.
//
// It reads id once, front to back, and stops as soon as it has n
// characters: the work is linear in len(id), at most the expansion of
// NFKD in UTF-8 (11 bytes out for a byte in, UAX #15) plus the 2-byte
// U+034F the iterator inserts into each run of more than 30 marks.
func skeletonPrefix(id string, n int) (skel string, work int) {
	var buf [32]byte
	b := buf[:0]
	got := 0
	var it norm.Iter
	it.InitString(norm.NFKD, id)
	for got < n && !it.Done() {
		seg := it.Next()
		work += len(seg)
		for len(seg) > 0 && got < n {
			r, size := utf8.DecodeRune(seg)
			seg = seg[size:]
			m := len(b)
			b = appendSkeleton(b, r)
			got += utf8.RuneCount(b[m:])
		}
	}
	// The last character may have stood for several, all of them ASCII
	// ("‥" is ".."): one byte each.
	if got > n {
		b = b[:len(b)-(got-n)]
	}
	return string(b), work
}

// appendSkeleton appends to b what r of an id in NFKD stands for in its
// skeleton: its row of [confusables] if it has one, as it is or case
// folded, else r case folded; or nothing, if r does not show or is a
// combining mark without a row (an accent). The few marks with a row
// are spacing marks drawn as a letter or a dot of their own (U+0C02
// TELUGU SIGN ANUSVARA is an o), so they are looked up before marks are
// dropped.
func appendSkeleton(b []byte, r rune) []byte {
	if log.Invisible(r) != "" {
		return b
	}
	if s, ok := lookalike(r); ok {
		return append(b, s...) // before folding: capital I reads as l, its fold i does not
	}
	if unicode.Is(unicode.M, r) {
		return b
	}
	// Simple case folding, by way of upper case so that the characters
	// whose lower case is not their fold (ς, ϱ, ſ) fold too. Full folding
	// differs only where it expands, and none of its expansions holds a
	// letter of "provlog" that NFKD has not already given. Cherokee folds
	// to its capitals (CaseFolding.txt), which the data maps: its small
	// letters are small capitals of them (ꮲ is Ꮲ, a P).
	f := unicode.ToLower(unicode.ToUpper(r))
	if unicode.Is(unicode.Cherokee, r) {
		f = unicode.ToUpper(r)
	}
	if f != r {
		if s, ok := lookalike(f); ok {
			return append(b, s...)
		}
		r = f
	}
	return utf8.AppendRune(b, r)
}

//go:generate go run ./internal/confusablesgen
//go:generate env PROVLOG_WRITE_CONFUSABLES_JS=1 go test -run TestConfusablesJS .

// A confusable is a row of [confusables]: the character from reads as
// the ASCII to, in lower case.
type confusable struct {
	from rune
	to   string
}

// lookalike returns r's skeleton by [confusables], and false if the
// table has no row for r.
//
// The table is Unicode's confusables.txt (UTS #39) restricted to the
// characters it takes for printable ASCII or for the middle dot, with
// the few rows provlog adds (dots it reads as the namespace's, and
// U+2502, which NFKD makes of U+FFE8, an l to the data):
// internal/confusablesgen makes it from the lines vendored there, and
// says which and why. A binary search, written out: it runs for each
// character of every id checked, up to twice.
func lookalike(r rune) (string, bool) {
	lo, hi := 0, len(confusables)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if confusables[m].from < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(confusables) && confusables[lo].from == r {
		return confusables[lo].to, true
	}
	return "", false
}

// Skeleton returns id's whole skeleton (see [skeletonPrefix]): two actor
// ids with the same skeleton are ids a reader could take for each other.
// Its work is linear in len(id).
func Skeleton(id string) string {
	s, _ := skeletonPrefix(id, math.MaxInt)
	return s
}

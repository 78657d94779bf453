package authn

import (
	"fmt"
	"strings"
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
// characters that do not show, and a small set of letters and dots of
// other scripts that look like those of "provlog." (Cyrillic о, U+3002
// IDEOGRAPHIC FULL STOP) read as them; so "prоvlog.x" and
// "pro\u200bvlog.x" are reserved and "provlog-bot", "provlogger" and
// "provlog:alice" are not. It lives here, where ids come in, rather than
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
// The skeleton is id in NFKD, each character case-folded and mapped by
// [confusable], without the characters that do not show ([log.Invisible])
// and without combining marks. NFKD rather than NFKC: composing puts a
// mark back inside its letter ("o" and U+0301 become "ó"), where it can
// no longer be dropped, and an id's composed and decomposed spellings
// are the same text to Unicode and must be judged alike. Its
// compatibility mappings do the rest of NFKC's work: fullwidth and
// mathematical letters, U+2024 and U+FF0E become ASCII.
//
// It reads id once, front to back, and stops as soon as it has n
// characters: the work is linear in len(id), at most the expansion of
// NFKD in UTF-8 (11 bytes out for a byte in, UAX #15) plus the 2-byte
// U+034F the iterator inserts into each run of more than 30 marks.
func skeletonPrefix(id string, n int) (skel string, work int) {
	var b strings.Builder
	var it norm.Iter
	it.InitString(norm.NFKD, id)
	for got := 0; got < n && !it.Done(); {
		seg := it.Next()
		work += len(seg)
		for len(seg) > 0 && got < n {
			r, size := utf8.DecodeRune(seg)
			seg = seg[size:]
			if r, ok := skeletonRune(r); ok {
				b.WriteRune(r)
				got++
			}
		}
	}
	return b.String(), work
}

// skeletonRune is what r of an id in NFKD stands for in its skeleton,
// and false if r has no part in it.
func skeletonRune(r rune) (rune, bool) {
	if log.Invisible(r) != "" || unicode.Is(unicode.M, r) {
		return 0, false
	}
	if c := confusable(r); c != 0 {
		return c, true // before folding: capital I reads as l, its fold i does not
	}
	// Simple case folding, by way of upper case so that the characters
	// whose lower case is not their fold (ς, ϱ, ſ) fold too. Full folding
	// differs only where it expands, and none of its expansions holds a
	// letter of "provlog" that NFKD has not already given.
	r = unicode.ToLower(unicode.ToUpper(r))
	if c := confusable(r); c != 0 {
		return c, true
	}
	return r, true
}

// confusable maps a character a reader takes for a letter of "provlog"
// or for the dot of [ActorNamespace] to that ASCII character, and every
// other to 0. It is a small hand-picked set, not Unicode's
// confusables.txt (UTS #39, which x/text does not carry): lower-case
// forms, as they are after folding, and the few that read as another
// letter only before folding. What NFKD already maps to ASCII (fullwidth
// forms, U+2024, U+FF0E, U+FE52, ℓ, ⅴ, mathematical letters) needs no
// case here.
func confusable(r rune) rune {
	switch r {
	// Cyrillic er, Greek rho, Coptic ro.
	case '\u0440', '\u03c1', '\u2ca3':
		return 'p'
	// Cyrillic ghe, Greek letter small capital gamma, Coptic gamma.
	case '\u0433', '\u1d26', '\u2c85':
		return 'r'
	// The digit, Cyrillic o, Greek omicron and sigma, Armenian oh, Hebrew
	// samekh, Latin small capital O.
	case '0', '\u043e', '\u03bf', '\u03c3', '\u0585', '\u05e1', '\u1d0f':
		return 'o'
	// Cyrillic izhitsa, Greek nu, Latin small capital V.
	case '\u0475', '\u03bd', '\u1d20':
		return 'v'
	// Capital I (Latin, Cyrillic, Greek; before folding), the digit one,
	// the vertical line, Cyrillic palochka, the dental click, Hebrew paseq
	// and vav, Arabic alef, the divides sign.
	case 'I', '\u0406', '\u0399', '1', '|', '\u04cf', '\u01c0', '\u05c0', '\u05d5', '\u0627', '\u2223':
		return 'l'
	// Latin script g, Armenian co.
	case '\u0261', '\u0581':
		return 'g'
	// Full stops of other scripts (ideographic, which NFKD gives for the
	// halfwidth one; Syriac supralinear and sublinear; Arabic; Vai;
	// Kharoshthi), Arabic-Indic zeros, which are dots, and middle dots
	// (Latin, which NFKD gives for the Greek ano teleia; hyphenation
	// point; word separator; dot and bullet operators; katakana, which
	// NFKD gives for the halfwidth one; Lisu tone mya ti).
	case '\u3002', '\u0701', '\u0702', '\u06d4', '\ua60e', '\U00010a50', '\u0660', '\u06f0',
		'\u00b7', '\u2027', '\u2e31', '\u22c5', '\u2219', '\u30fb', '\ua4f8':
		return '.'
	}
	return 0
}

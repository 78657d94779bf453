package authn

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/provlog/provlog/log"
)

// maxWork bounds the bytes skeletonPrefix may read for an id of n bytes:
// NFKD's expansion in UTF-8 (11 times, UAX #15) and a 2-byte U+034F for
// every 30 marks, each of at least 2 bytes.
func maxWork(n int) int { return 11*n + 2*(n/60+1) }

// wholeSkeleton is id's skeleton built stage by stage over the whole
// string, the slow reading skeletonPrefix must agree with.
func wholeSkeleton(id string) string {
	var b []byte
	for _, r := range norm.NFKD.String(id) {
		b = appendSkeleton(b, r)
	}
	return string(b)
}

// FuzzCheckActor: an id is reserved exactly when its whole skeleton is
// "provlog" or begins "provlog.", and then CheckActor refuses it; the
// verdict does not depend on whether the id is composed or decomposed;
// the work is bounded by the id's length, and CheckActor reads no
// skeleton of an id over its limit.
func FuzzCheckActor(f *testing.F) {
	for _, s := range []string{
		"provlog", "provlog.operator", "Provlog.Retention", "provlog\u2024x", "provlog\uff0ex",
		"\uff50rovlog.x", "pr\u043evlog.x", "pro\u0301vlog.x", "pro\u200bvlog.x", "provIog.x",
		"provlog-bot", "provlogger", "provlog:alice", "local", "alice@example.com", "пётр", "山田",
		"\ufdfa\ufdfa", "o" + strings.Repeat("\u0301", 70), "provlog\xff.x",
		"pr\u0966vlog.x", "pr\u0c02vlog.x", "provlog\u2025x", "\u041c\u041c", "prov\uffe8og", "\u2488\u2493",
		"provlogm", "provlog\ua4fa", "provlog\ua4fbx",
	} {
		f.Add(s)
	}
	const max = 128
	f.Fuzz(func(t *testing.T, id string) {
		whole := wholeSkeleton(id)
		want := whole == log.GenesisActor || strings.HasPrefix(whole, log.ActorNamespace)
		if got := ReservedActor(id); got != want {
			t.Fatalf("ReservedActor(%+q) = %v, but its skeleton is %+q", id, got, whole)
		}
		err := CheckActor(id, max)
		if want && err == nil {
			t.Fatalf("CheckActor(%+q) passed a reserved id (skeleton %+q)", id, whole)
		}
		if len(id) > max && (err == nil || !strings.Contains(err.Error(), "at most")) {
			t.Fatalf("CheckActor of %d bytes = %v, want the length refused before anything is normalised", len(id), err)
		}
		if utf8.ValidString(id) {
			for _, form := range []norm.Form{norm.NFC, norm.NFD, norm.NFKC} {
				if got := ReservedActor(form.String(id)); got != want {
					t.Fatalf("ReservedActor(%+q) = %v, but of %+q it is %v", form.String(id), got, id, want)
				}
			}
		}
		if _, work := skeletonPrefix(id, len(id)+1); work > maxWork(len(id)) {
			t.Fatalf("skeleton of %d bytes read %d bytes, over %d", len(id), work, maxWork(len(id)))
		}
		// The prefix is the whole skeleton's first characters, however
		// many a character stands for ("‥" is two). Of valid UTF-8 only:
		// x/text's NFKD of a whole string can leave the character after
		// an invalid byte undecomposed ("\xf7Į"), where its iterator
		// decomposes it. The verdict is the same either way: U+FFFD in
		// the first eight characters is in neither "provlog" nor
		// "provlog.".
		if utf8.ValidString(id) && Skeleton(id) != whole {
			t.Fatalf("Skeleton(%+q) = %+q, want %+q", id, Skeleton(id), whole)
		}
		n := len(log.ActorNamespace)
		want8 := whole
		if rs := []rune(whole); len(rs) > n {
			want8 = string(rs[:n])
		}
		if got8, _ := skeletonPrefix(id, n); utf8.ValidString(id) && got8 != want8 {
			t.Fatalf("skeletonPrefix(%+q, %d) = %+q, but the whole skeleton begins %+q", id, n, got8, want8)
		}
	})
}

// TestSkeletonWork: for ids far over any actor limit, made of what
// expands most under NFKD, of marks and of characters that do not show,
// the work stays within maxWork; and ReservedActor stops reading once it
// has the eight characters it compares.
func TestSkeletonWork(t *testing.T) {
	const n = 1 << 16
	for name, id := range map[string]string{
		"U+FDFA":    strings.Repeat("\ufdfa", n),
		"marks":     "o" + strings.Repeat("\u0301", n),
		"invisible": "p" + strings.Repeat("\u200b", n),
		"ascii":     strings.Repeat("a", n),
		"invalid":   strings.Repeat("\xff", n),
	} {
		if _, work := skeletonPrefix(id, len(id)+1); work > maxWork(len(id)) {
			t.Errorf("%s: skeleton of %d bytes read %d bytes, over %d", name, len(id), work, maxWork(len(id)))
		}
	}
	id := "provlog." + strings.Repeat("\ufdfa", n)
	if _, work := skeletonPrefix(id, len(log.ActorNamespace)); work > maxWork(len(log.ActorNamespace)+len("\ufdfa")) {
		t.Errorf("reading the first %d characters of a %d-byte id read %d bytes", len(log.ActorNamespace), len(id), work)
	}
}

// TestReservedLookalikes: an id a reader would take for provlog's own,
// written with look-alike letters or dots, other case, accents or
// characters that do not show, is refused as looking like it; ids that
// merely start with the word, and names in other scripts, pass.
func TestReservedLookalikes(t *testing.T) {
	for _, id := range []string{
		"provlog\u2024operator",                      // ONE DOT LEADER
		"provlog\uff0eoperator",                      // FULLWIDTH FULL STOP
		"provlog\u3002operator",                      // IDEOGRAPHIC FULL STOP
		"provlog\uff61x",                             // HALFWIDTH IDEOGRAPHIC FULL STOP
		"provlog\u0701x",                             // SYRIAC SUPRALINEAR FULL STOP
		"provlog\u00b7x",                             // MIDDLE DOT
		"provlog\ufe52x",                             // SMALL FULL STOP
		"\uff50rovlog.x",                             // FULLWIDTH LATIN SMALL LETTER P
		"\uff30\uff32\uff2f\uff36\uff2c\uff2f\uff27", // fullwidth PROVLOG
		"pr\u043evlog.x",                             // CYRILLIC SMALL LETTER O
		"\u0440r\u043evl\u043eg",                     // Cyrillic er and o
		"\u0420ROVLOG.x",                             // CYRILLIC CAPITAL LETTER ER
		"pr\u03bfv\u04cfog.x",                        // Greek omicron, Cyrillic palochka
		"prov\u0399og",                               // GREEK CAPITAL LETTER IOTA for l
		"provIog.operator",                           // capital I for l
		"pr0vlog.x",                                  // digit zero for o
		"provlo\u0261.x",                             // LATIN SMALL LETTER SCRIPT G
		"\U0001d429\U0001d42b\U0001d428\U0001d42f\U0001d425\U0001d428\U0001d420", // mathematical bold
		"pro\u0301vlog.x", // combining acute
		"pr\u00f3vlog.x",  // the same, precomposed
		"provlog\u0323",   // combining dot below
		"provlog\u0338.x", // combining long solidus overlay
		"pro\u200bvlog.x", // ZERO WIDTH SPACE
		"provlog\u200d.x", // ZERO WIDTH JOINER
		"pro\ufe0fvlog",   // VARIATION SELECTOR-16
		"p\u034frovlog.x", // COMBINING GRAPHEME JOINER
		"provlog\u2060",   // WORD JOINER
		// Look-alikes from Unicode's confusables data (UTS #39) that
		// the hand-picked set before it let through.
		"pr\u0966vlog.x",     // DEVANAGARI DIGIT ZERO for o
		"pr\u0e50vlog.x",     // THAI DIGIT ZERO
		"pr\u0ed0vlog.x",     // LAO DIGIT ZERO
		"pr\u1040vlog.x",     // MYANMAR DIGIT ZERO
		"pr\u0c02vlog.x",     // TELUGU SIGN ANUSVARA, a spacing mark drawn as o
		"prov\u07caog",       // NKO LETTER A for l
		"prov\u2d4fog.x",     // TIFINAGH LETTER YAN
		"prov\u2c92og.x",     // COPTIC CAPITAL LETTER IAUDA
		"prov\ua4f2og.x",     // LISU LETTER I
		"prov\u16c1og.x",     // RUNIC LETTER ISAZ IS ISS I
		"prov\uffe8og",       // HALFWIDTH FORMS LIGHT VERTICAL, which NFKD makes U+2502
		"pro\u2228log.x",     // LOGICAL OR for v
		"pro\uaba9log.x",     // CHEROKEE SMALL LETTER DO
		"provlo\u1d83.x",     // LATIN SMALL LETTER G WITH PALATAL HOOK
		"provlo\ua4d6.x",     // LISU LETTER GA
		"provlo\u13c0.x",     // CHEROKEE LETTER NAH
		"\u2374rovlog.x",     // APL FUNCTIONAL SYMBOL RHO for p
		"\u00ferovlog.x",     // LATIN SMALL LETTER THORN
		"\ua4d1rovlog.x",     // LISU LETTER PA
		"\u13e2rovlog.x",     // CHEROKEE LETTER TLV
		"\u146drovlog.x",     // CANADIAN SYLLABICS KI
		"p\uab47ovlog.x",     // LATIN SMALL LETTER R WITHOUT HANDLE
		"p\uab81ovlog.x",     // CHEROKEE SMALL LETTER HU
		"p\ua4e3ovlog.x",     // LISU LETTER ZHA
		"provlog\U0001d16dx", // MUSICAL SYMBOL COMBINING AUGMENTATION DOT
		"provlog\u2022x",     // BULLET, one of the middle dots
		"provlog\u16ebx",     // RUNIC SINGLE PUNCTUATION
		"provlog\ua78fx",     // LATIN LETTER SINOLOGICAL DOT
		"provlog\U00010101x", // AEGEAN WORD SEPARATOR DOT
		"provlog\u1427x",     // CANADIAN SYLLABICS FINAL MIDDLE DOT
		"provlog\ua4fa",      // LISU LETTER TONE MYA CYA, two dots: the eighth character is the first
		// Small capitals, which the data takes for no ASCII letter
		// (but ᴏ and ᴠ): PROVLOG to a reader.
		"\u1d18\u0280\u1d0f\u1d20\u029f\u1d0f\u0262", // LATIN LETTER SMALL CAPITAL P, R, O, V, L, O, G
		"\u1d18rovlog.x", "p\u0280ovlog", "prov\u029fog.x", "provlo\u0262",
		// Cherokee small letters, which fold to the capitals the data maps.
		"\uabb2rovlog.x", // CHEROKEE SMALL LETTER TLV, Ꮲ's small form
		"p\uab71ovlog",   // CHEROKEE SMALL LETTER E, Ꭱ's
		"prov\uabaeog.x", // CHEROKEE SMALL LETTER TLE, Ꮮ's
		"provlo\uab90.x", // CHEROKEE SMALL LETTER NAH, Ꮐ's
	} {
		if !ReservedActor(id) {
			t.Errorf("ReservedActor(%+q) = false, want true", id)
		}
		// An id holding a character that does not show is refused for
		// that first (log.CheckActor), which says what and where it is.
		err := CheckActor(id, 64)
		said := err != nil && (strings.Contains(err.Error(), "looks like one of the sidecar's own") && strings.Contains(err.Error(), "choose an id") ||
			strings.Contains(err.Error(), "a reader of the log would not see it"))
		if !said {
			t.Errorf("CheckActor(%+q) = %v, want it to say the id looks like the sidecar's own, or what in it does not show", id, err)
		}
	}
	for _, id := range []string{
		"provlog-bot", "provlogger", "provlog:alice", "provlog_x", "provlog operator", "provlogs.x",
		"provlog2", "local", "alice@example.com", "пётр", "山田", "Ρόδος", "José", "Jose\u0301",
		"provision.x", "prolog.x", "idp:provlog", "x.provlog.operator", "\u0440\u043e\u0433",
		// Names in scripts whose letters the data maps to ASCII: only
		// "provlog" and "provlog." are compared, so they pass.
		"Ольга", "Ιωάννης", "प्रिया", "ประวิทย์", "ᏣᎳᎩ", "李明", "ⵜⴰⵎⴰⵣⵉⵖⵜ", "provlog\u2013bot",
	} {
		if ReservedActor(id) {
			t.Errorf("ReservedActor(%+q) = true, want false", id)
		}
		if err := CheckActor(id, 64); err != nil {
			t.Errorf("CheckActor(%+q) = %v", id, err)
		}
	}
}

// BenchmarkCheckActor: the check each configured id, mapped token and
// handoff goes through, on ids of each kind: plain ASCII, a name in
// another script, a look-alike of provlog's own, and one of the longest
// ids, of the character NFKD expands most.
func BenchmarkCheckActor(b *testing.B) {
	for _, c := range []struct{ name, id string }{
		{"ascii", "alice@example.com"},
		{"cyrillic", "пётр.иванов"},
		{"lookalike", "pr\u043evlog.operator"},
		{"long", strings.Repeat("\ufdfa", MaxActor/len("\ufdfa"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				CheckActor(c.id, MaxActor)
			}
		})
	}
}

// TestConfusablesRead: the skeleton reads each character as the table,
// Unicode's confusables data, says: every one NFKD leaves alone, and,
// since NFKD comes first, every one the data takes for a character of
// "provlog." whatever NFKD makes of it (U+FFE8 becomes U+2502, which is
// given its row). The characters this Go's Unicode has not assigned are
// left out: log.CheckActor refuses them. The table is in code point
// order, as its binary search needs.
func TestConfusablesRead(t *testing.T) {
	for i, c := range confusables {
		if i > 0 && confusables[i-1].from >= c.from {
			t.Fatalf("row U+%04X after U+%04X: not in code point order", c.from, confusables[i-1].from)
		}
		if log.Invisible(c.from) != "" {
			continue
		}
		one := len(c.to) == 1 && strings.Contains(log.ActorNamespace, c.to)
		if !one && norm.NFKD.String(string(c.from)) != string(c.from) {
			continue
		}
		if got := wholeSkeleton(string(c.from)); got != c.to {
			t.Errorf("U+%04X %q reads as %q, want %q", c.from, string(c.from), got, c.to)
		}
	}
}

// TestConfusablesVersion: the data is of this Go's Unicode or later, so
// every character assigned here that the data maps has its row (one
// assigned later is refused by log.CheckActor as unassigned).
func TestConfusablesVersion(t *testing.T) {
	parse := func(v string) (n [3]int) {
		for i, f := range strings.SplitN(v, ".", 3) {
			n[i], _ = strconv.Atoi(f)
		}
		return n
	}
	if data, goes := parse(confusablesVersion), parse(unicode.Version); slices.Compare(data[:], goes[:]) < 0 {
		t.Errorf("the table is from confusables.txt %s, older than Unicode %s of this Go: take the data of %s or later (go run ./internal/confusablesgen -subset FILE in proxy/authn)", confusablesVersion, unicode.Version, unicode.Version)
	}
}

package authn

import (
	"strings"
	"testing"
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
	var b strings.Builder
	for _, r := range norm.NFKD.String(id) {
		if r, ok := skeletonRune(r); ok {
			b.WriteRune(r)
		}
	}
	return b.String()
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
	} {
		if ReservedActor(id) {
			t.Errorf("ReservedActor(%+q) = true, want false", id)
		}
		if err := CheckActor(id, 64); err != nil {
			t.Errorf("CheckActor(%+q) = %v", id, err)
		}
	}
}

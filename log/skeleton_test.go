package log

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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
		want := whole == GenesisActor || strings.HasPrefix(whole, ActorNamespace)
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
	if _, work := skeletonPrefix(id, len(ActorNamespace)); work > maxWork(len(ActorNamespace)+len("\ufdfa")) {
		t.Errorf("reading the first %d characters of a %d-byte id read %d bytes", len(ActorNamespace), len(id), work)
	}
}

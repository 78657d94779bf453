package log

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// GenesisActor is the actor of every genesis entry, and of every other
// entry the sidecar writes on its own account (tools lists, witness
// conflicts): no client may act as it.
const GenesisActor = "provlog"

// ActorNamespace begins every other actor id provlog writes entries as
// (retention's "provlog.retention", the operator commands'
// "provlog.operator"); with GenesisActor it is reserved: see
// [ReservedActor].
//
// The dot, not a colon: "provlog.retention" was in logs before the
// namespace was reserved, so every id provlog ever wrote as its own is
// in it and none had to change. The ids a user writes that it takes
// (an issuer at host provlog.example maps "provlog.example:alice" by
// default) a colon would take as well, from an issuer at host provlog.
const ActorNamespace = GenesisActor + "."

// The ids in ActorNamespace provlog writes entries as. It writes as no
// other, so in a log an entry by another reserved id is a client's,
// written before the reservation.
const (
	// RetentionActor writes the purge entries of the sidecar's
	// background retention.
	RetentionActor = ActorNamespace + "retention"
	// OperatorActor writes the entries of the operator's offline
	// commands on a stopped sidecar's data dir (purge --data, replay
	// --data), which no token authenticated.
	OperatorActor = ActorNamespace + "operator"
)

// ReservedActor reports whether id is provlog's own: GenesisActor, or
// ActorNamespace followed by anything, in any case ("Provlog.Operator"
// reads as provlog's to a person as well). A reader of the log can thus
// tell the entries provlog wrote from every client's by the actor alone.
// Ids that only read as these (look-alike letters, invisible characters)
// are refused where ids come in, by package authn, whose Unicode tables
// this package, a verifier's core, does without.
func ReservedActor(id string) bool {
	n := len(ActorNamespace)
	return strings.EqualFold(id, GenesisActor) || len(id) >= n && strings.EqualFold(id[:n], ActorNamespace)
}

// CheckActor says what makes id unfit for a client to act as: it is not
// valid UTF-8 of at most max bytes, it is the sidecar's own
// ([ReservedActor]), or it is one a reader of the log could take for
// another (space at either end, or a character that does not show: see
// [Invisible]). Static tokens' ids and those mapped from OAuth claims
// are both checked with it, when a config is read or a token mapped;
// entries already in a log are never judged by it, so a log written
// before a character was refused here reads and audits as it did.
func CheckActor(id string, max int) error {
	switch {
	case !utf8.ValidString(id) || len(id) > max:
		return fmt.Errorf("actor id %q must be valid UTF-8 of at most %d bytes", id, max)
	case ReservedActor(id):
		return fmt.Errorf("actor id %q is the sidecar's own: %q and every id beginning %q, in any case, name the entries provlog writes itself; choose an id outside them", id, GenesisActor, ActorNamespace)
	case strings.TrimSpace(id) != id:
		return fmt.Errorf("actor id %q has space at its start or end", id)
	}
	n := 0
	for _, r := range id {
		n++
		if what := Invisible(r); what != "" {
			return fmt.Errorf("actor id %q holds %s, U+%04X, at character %d; a reader of the log would not see it, and could take the id for another", id, what, r, n)
		}
	}
	return nil
}

// Invisible says what r is when it does not show as a character of its
// own to someone reading text, and "" when it does (a letter, mark,
// number, punctuation, symbol or space). Actor ids may hold no such
// character (CheckActor), and a task's title must hold a character that
// is neither this nor space (opp).
//
// The set is every code point outside Unicode's graphic categories (L,
// M, N, P, S, Zs): controls, format characters (Cf: zero-width space and
// joiners, bidirectional overrides, U+FEFF, U+2060, the soft hyphen,
// tags), line and paragraph separators, private-use characters (a font
// may draw them as anything, or as nothing) and code points unassigned
// in this build's Unicode tables (unicode.Version). To those it adds the
// graphic code points Unicode itself says renderers show as nothing,
// Default_Ignorable_Code_Point of UAX #44: the variation selectors and
// Other_Default_Ignorable_Code_Point (the Hangul fillers U+115F, U+1160,
// U+3164 and U+FFA0, the combining grapheme joiner U+034F, the Khmer
// inherent vowels U+17B4 and U+17B5); and U+2800, the blank braille
// pattern, which is graphic and not default-ignorable but prints as a
// space that strings.TrimSpace does not remove. All of Cf is refused,
// not only its default-ignorable part: the rest (U+0600 and its like)
// changes how its neighbours are drawn, and none belongs in an id. The
// cost is that an id cannot hold an emoji sequence joined by U+200D or
// styled by U+FE0F: an id is a name a reader must tell from others.
func Invisible(r rune) string {
	switch {
	case unicode.IsControl(r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "a format character (shown as nothing, or changing how its neighbours show)"
	case unicode.Is(unicode.Variation_Selector, r):
		return "a variation selector (shown as nothing)"
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return "a default-ignorable character (shown as nothing)"
	case r == '\u2800':
		return "the blank braille pattern (shown as a space)"
	case unicode.IsGraphic(r):
		return ""
	case unicode.In(r, unicode.Zl, unicode.Zp):
		return "a line or paragraph separator"
	case unicode.Is(unicode.Co, r):
		return "a private-use character (no font need show it)"
	}
	return "a code point not assigned in Unicode " + unicode.Version + " (no font need show it)"
}

// A GenesisEntry is the first entry of every log (DESIGN §2): it commits
// the log to its origin, its verifier key and its anchoring key.
type GenesisEntry struct {
	Time   time.Time
	Origin string
	// VKey is the log's verifier key (signed-note form).
	VKey string
	// AnchorKey is the anchoring public key, DER SubjectPublicKeyInfo
	// (base64 in the entry); nil for a log made without one (null or "").
	AnchorKey []byte
	// Version is the software version that created the log.
	Version string
}

// Genesis returns the bytes of the genesis entry a new log starts with.
func Genesis(t time.Time, origin, vkey string, anchorKey []byte, version string) ([]byte, error) {
	g := &GenesisEntry{Time: t, Origin: origin, VKey: vkey, AnchorKey: anchorKey, Version: version}
	return g.Marshal()
}

// Marshal returns the canonical entry bytes of g.
func (g *GenesisEntry) Marshal() ([]byte, error) {
	e := &Entry{Kind: KindGenesis, Time: g.Time, Actor: GenesisActor, Fields: map[string]any{
		"origin":     g.Origin,
		"vkey":       g.VKey,
		"anchor_key": g.AnchorKey, // written as base64, as encoding/json does
		"version":    g.Version,
	}}
	return e.Marshal()
}

// ParseGenesis reads the fields of a genesis entry. It fails if e is of
// another kind, if "origin" or "vkey" is not a string, or if
// "anchor_key" is neither base64 nor null. Members it does not know are
// ignored, so a later version may add some.
func ParseGenesis(e *Entry) (*GenesisEntry, error) {
	if e.Kind != KindGenesis {
		return nil, fmt.Errorf("entry is a %q, not a genesis entry", e.Kind)
	}
	g := &GenesisEntry{Time: e.Time}
	var ok bool
	if g.Origin, ok = e.Fields["origin"].(string); !ok {
		return nil, fmt.Errorf("genesis entry: \"origin\" is not a string")
	}
	if g.VKey, ok = e.Fields["vkey"].(string); !ok {
		return nil, fmt.Errorf("genesis entry: \"vkey\" is not a string")
	}
	switch ak := e.Fields["anchor_key"].(type) {
	case nil:
	case string:
		der, err := base64.StdEncoding.DecodeString(ak)
		if err != nil {
			return nil, fmt.Errorf("genesis entry: \"anchor_key\" is not base64: %w", err)
		}
		if len(der) > 0 {
			g.AnchorKey = der
		}
	default:
		return nil, fmt.Errorf("genesis entry: \"anchor_key\" is not a string")
	}
	g.Version, _ = e.Fields["version"].(string)
	return g, nil
}

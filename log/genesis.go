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

// CheckActor says what makes id unfit for a client to act as: it is the
// sidecar's own (GenesisActor), not valid UTF-8 of at most max bytes, or
// one a reader of the log could take for another (a control character,
// space at either end). Static tokens' ids and those mapped from OAuth
// claims are both checked with it.
func CheckActor(id string, max int) error {
	switch {
	case id == GenesisActor:
		return fmt.Errorf("actor id %q is the sidecar's own (the entries it writes itself)", id)
	case !utf8.ValidString(id) || len(id) > max:
		return fmt.Errorf("actor id %q must be valid UTF-8 of at most %d bytes", id, max)
	case strings.TrimSpace(id) != id:
		return fmt.Errorf("actor id %q has space at its start or end", id)
	case strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("actor id %q holds a control character", id)
	}
	return nil
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

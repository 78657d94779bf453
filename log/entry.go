package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxEntrySize is the largest entry the log accepts, in bytes: the limit of
// a c2sp.org/tlog-tiles entry bundle's 16-bit length prefix.
const MaxEntrySize = 65535

// EntryVersion is the value of every entry's "v" field.
const EntryVersion = 1

// TimeFormat is the layout of an entry's "time" field: RFC 3339 in UTC with
// exactly nine fractional digits, so entries sort and compare as text.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// Entry kinds written by provlog.
const (
	KindGenesis         = "genesis"
	KindCall            = "call"
	KindAnchor          = "anchor"
	KindWitnessConflict = "witness.conflict"
)

// ErrEntryTooLarge is returned when an encoded entry exceeds MaxEntrySize.
var ErrEntryTooLarge = errors.New("entry too large")

// reserved names the common fields, which Fields may not set.
var reserved = map[string]bool{"v": true, "kind": true, "time": true, "actor": true, "auth": true}

// An Entry is one log record. Its wire form is the RFC 8785 canonical JSON
// object holding "v" (always 1), "kind", "time", "actor", "auth" when the
// actor was authenticated by an identity provider, and the members of
// Fields.
type Entry struct {
	Kind  string
	Time  time.Time
	Actor string
	// Auth is how the actor was authenticated, for entries written for
	// a request bearing an OAuth access token; nil otherwise (stdio,
	// static tokens, the proxy's own entries).
	Auth *Auth
	// Fields holds the kind's own members. Values are anything
	// encoding/json can marshal; they are canonicalized with the rest.
	Fields map[string]any
}

// Marshal returns the canonical bytes of e. It fails if Kind is empty, if
// Fields uses a common field's name, if a value cannot be encoded, or if
// the result is longer than MaxEntrySize (the error wraps
// [ErrEntryTooLarge]; move big values to the blob store and keep their hash).
func (e *Entry) Marshal() ([]byte, error) {
	if e.Kind == "" {
		return nil, errors.New("entry: kind is empty")
	}
	ms := make([]member, 0, len(e.Fields)+5)
	vals := make([]any, 0, len(e.Fields)+1)
	for k, v := range e.Fields {
		if reserved[k] {
			return nil, fmt.Errorf("entry: field %q is reserved", k)
		}
		if !utf8.ValidString(k) {
			return e.marshalRoundTrip()
		}
		ms = append(ms, member{key: k, v: len(vals)})
		vals = append(vals, v)
	}
	return marshalEntry(e.Kind, e.Time, e.Actor, e.Auth, ms, vals)
}

// marshalEntry writes an entry of kind: the common members and the kind's
// own, ms (whose keys are valid UTF-8, unique and not reserved; values
// of memberAny in vals), in canonical order. It is Marshal's writing, and that of the kinds that
// know their members (callentry.go), which skip the map.
func marshalEntry(kind string, t time.Time, actor string, auth *Auth, ms []member, vals []any) ([]byte, error) {
	if kind == "" {
		return nil, errors.New("entry: kind is empty")
	}
	if err := checkEntryActor(actor); err != nil {
		return nil, err
	}
	ms = append(ms, numMember("v", EntryVersion), strMember("kind", kind), timeMember("time", t), strMember("actor", actor))
	if auth != nil {
		if err := auth.check(); err != nil {
			return nil, fmt.Errorf("entry: %w", err)
		}
		ms = append(ms, member{key: "auth", v: len(vals)})
		vals = append(vals, auth.fields())
	}
	b, key, err := appendMembers(make([]byte, 0, max(512, membersSize(ms))), ms, vals, 1)
	if err != nil {
		return nil, fmt.Errorf("entry: encoding %s field %q: %w", kind, key, err)
	}
	if len(b) > MaxEntrySize {
		return nil, fmt.Errorf("entry: %s entry is %d bytes, over the limit of %d: %w", kind, len(b), MaxEntrySize, ErrEntryTooLarge)
	}
	return b, nil
}

// checkEntryActor refuses to write an entry whose actor a reader could
// not see as written: bytes that are not UTF-8, or a character
// [Invisible] names (a control, ESC among them, a bidirectional override,
// a zero-width character). Ids are checked where they come in
// ([CheckActor], with more rules); this holds every writer of the log to
// the part of that a reader depends on, whatever its caller checked.
// Entries already in a log are read as they are.
func checkEntryActor(actor string) error {
	if !utf8.ValidString(actor) {
		return fmt.Errorf("entry: actor %q is not valid UTF-8", actor)
	}
	for i, r := range actor {
		if what := Invisible(r); what != "" {
			return fmt.Errorf("entry: actor %q holds %s, U+%04X, at byte %d; a reader of the log would not see it", actor, what, r, i)
		}
	}
	return nil
}

// marshalRoundTrip is Marshal the long way: encoding/json writes the
// entry, Canonicalize rewrites it. Marshal takes it only for field names
// that are not valid UTF-8; tests hold the two to the same output.
func (e *Entry) marshalRoundTrip() ([]byte, error) {
	if e.Kind == "" {
		return nil, errors.New("entry: kind is empty")
	}
	m := make(map[string]any, len(e.Fields)+4)
	for k, v := range e.Fields {
		if reserved[k] {
			return nil, fmt.Errorf("entry: field %q is reserved", k)
		}
		m[k] = v
	}
	if err := checkEntryActor(e.Actor); err != nil {
		return nil, err
	}
	m["v"] = EntryVersion
	m["kind"] = e.Kind
	m["time"] = e.Time.UTC().Format(TimeFormat)
	m["actor"] = e.Actor
	if e.Auth != nil {
		if err := e.Auth.check(); err != nil {
			return nil, fmt.Errorf("entry: %w", err)
		}
		m["auth"] = e.Auth.fields()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("entry: encoding %s fields: %w", e.Kind, err)
	}
	b, err := Canonicalize(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	if len(b) > MaxEntrySize {
		return nil, fmt.Errorf("entry: %s entry is %d bytes, over the limit of %d: %w", e.Kind, len(b), MaxEntrySize, ErrEntryTooLarge)
	}
	return b, nil
}

// ParseEntry parses entry bytes as stored in the log. It accepts only what
// Marshal produces: a canonical JSON object of at most MaxEntrySize bytes
// with "v" 1, a non-empty string "kind", a "time" in [TimeFormat] and a
// string "actor". Numbers in Fields are json.Number.
func ParseEntry(b []byte) (*Entry, error) {
	if len(b) > MaxEntrySize {
		return nil, fmt.Errorf("entry: %d bytes, over the limit of %d: %w", len(b), MaxEntrySize, ErrEntryTooLarge)
	}
	c, err := Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	if !bytes.Equal(c, b) {
		return nil, errors.New("entry: not in RFC 8785 canonical form")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("entry: not a JSON object: %w", err)
	}
	if v, ok := m["v"].(json.Number); !ok || v.String() != "1" {
		return nil, fmt.Errorf("entry: \"v\" must be %d", EntryVersion)
	}
	e := &Entry{}
	var ok bool
	if e.Kind, ok = m["kind"].(string); !ok || e.Kind == "" {
		return nil, errors.New("entry: \"kind\" must be a non-empty string")
	}
	ts, ok := m["time"].(string)
	if !ok {
		return nil, errors.New("entry: \"time\" must be a string")
	}
	// time.Parse is lenient (one-digit hours, a comma before the
	// fraction), so also require the one spelling Marshal writes.
	if e.Time, err = time.Parse(TimeFormat, ts); err != nil || e.Time.Format(TimeFormat) != ts {
		return nil, fmt.Errorf("entry: \"time\" %q is not RFC 3339 UTC with nanoseconds", ts)
	}
	if e.Actor, ok = m["actor"].(string); !ok {
		return nil, errors.New("entry: \"actor\" must be a string")
	}
	if v, ok := m["auth"]; ok {
		if e.Auth, err = parseAuth(v); err != nil {
			return nil, fmt.Errorf("entry: %w", err)
		}
	}
	for k := range reserved {
		delete(m, k)
	}
	e.Fields = m
	return e, nil
}

// NewEntry returns the entry of kind whose Fields are the JSON members of
// fields, a struct with json tags: the typed form of each kind (its owner
// defines it, with Marshal and Parse functions) goes through here, so no
// kind is built as a map with string keys outside this package. Numbers
// stay exact (json.Number).
func NewEntry(kind string, t time.Time, actor string, fields any) (*Entry, error) {
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("entry: encoding %s fields: %w", kind, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("entry: %s fields are not a JSON object: %w", kind, err)
	}
	return &Entry{Kind: kind, Time: t, Actor: actor, Fields: m}, nil
}

// DecodeFields decodes e's Fields into v, a pointer to the struct of its
// kind, refusing members v does not have.
func (e *Entry) DecodeFields(v any) error {
	b, err := json.Marshal(e.Fields)
	if err != nil {
		return fmt.Errorf("%s entry: %w", e.Kind, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s entry: %w", e.Kind, err)
	}
	return nil
}

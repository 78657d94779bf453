package replay

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
)

// KindReplay is the kind of the log entry recording a replay run; its
// members are a [Record].
const KindReplay = "replay"

// A Record is a replay entry: the summary of one replay run that
// `provlog replay` writes to the log, directly or through a running
// sidecar's record_replay tool (docs/formats.md, "replay").
//
// # Wire form
//
// The members are range {from, to}, runs, counts, outcomes or
// outcomes_sha256, and, when set, definitions, definition_changes or
// definition_changes_sha256, and ignore_sha256. Entries written before
// replay compared tool definitions have no definitions.
//
// # What Parse holds a record to
//
// A record is what [Report.Record] can make, so that a client of
// record_replay cannot slip anything else into the log under this kind:
// no member it does not name, none null, every class and definition a
// known one, counts that add up to no more calls than the range holds,
// outcomes that name exactly the counted calls inside the range, each in
// one class, and definition changes that name as many calls as are
// counted changed or gone, each in one change and among those outcomes
// names (when it is set). Its size is bounded by the entry's
// ([log.MaxEntrySize]).
type Record struct {
	Time  time.Time
	Actor string
	Auth  *log.Auth // how Actor was authenticated, if by an identity provider

	// From and To are the log indices replayed, To exclusive.
	From, To uint64
	// Runs is how often each call was re-run.
	Runs int
	// Counts are the calls per class ([Classes]).
	Counts map[string]int
	// Outcomes are each class's calls as compact ranges ([Ranges]); a
	// class without calls is left out. An entry too large for the log
	// has OutcomesSHA256 instead, the SHA-256 of the JCS form of the
	// Outcomes it replaces. Exactly one of the two is set.
	Outcomes       map[string]string
	OutcomesSHA256 string
	// Definitions are the calls per [Definitions] (nil in entries from
	// before definitions were compared).
	Definitions map[string]int
	// DefinitionChanges are the definitions that changed or are gone,
	// nil when none did; DefinitionChangesSHA256 replaces them as
	// OutcomesSHA256 replaces Outcomes.
	DefinitionChanges       []DefinitionChange
	DefinitionChangesSHA256 string
	// IgnoreSHA256 is the SHA-256 of the JCS form of the servers'
	// replay_ignore lists, by server id; empty when there were none.
	IgnoreSHA256 string
}

// recordWire is a Record's members. Pointers tell a member left out
// from one written empty, which Outcomes and Definitions can be.
type recordWire struct {
	Range                   *recordRange       `json:"range"`
	Runs                    *int               `json:"runs"`
	Counts                  map[string]int     `json:"counts"`
	Outcomes                *map[string]string `json:"outcomes,omitempty"`
	OutcomesSHA256          string             `json:"outcomes_sha256,omitempty"`
	Definitions             *map[string]int    `json:"definitions,omitempty"`
	DefinitionChanges       []DefinitionChange `json:"definition_changes,omitempty"`
	DefinitionChangesSHA256 string             `json:"definition_changes_sha256,omitempty"`
	IgnoreSHA256            string             `json:"ignore_sha256,omitempty"`
}

type recordRange struct {
	From *uint64 `json:"from"`
	To   *uint64 `json:"to"`
}

// maxInt is the largest integer a record holds: JCS writes numbers as
// IEEE 754 doubles, which above 2^53 would read back as other numbers.
const maxInt = 1 << 53

// recordMembers are the members a replay entry may hold, and whether
// each is required.
var recordMembers = map[string]bool{
	"range": true, "runs": true, "counts": true, "outcomes": false, "outcomes_sha256": false, "definitions": false,
	"definition_changes": false, "definition_changes_sha256": false, "ignore_sha256": false,
}

// Record returns the record of this run: the range, runs, counts per
// class, per class the call indices as compact ranges, counts per
// Definition, the changed definitions with their calls, and the SHA-256
// of the ignore lists of servers.
func (rep *Report) Record(actor string, t time.Time, servers []proxy.ServerConfig) *Record {
	by := map[string][]uint64{}
	for _, o := range rep.Outcomes {
		by[o.Class] = append(by[o.Class], o.Index)
	}
	r := &Record{Time: t, Actor: actor, From: rep.From, To: rep.To, Runs: rep.Runs, Counts: rep.Counts,
		Outcomes: map[string]string{}, Definitions: rep.Definitions}
	for c, idx := range by {
		r.Outcomes[c] = Ranges(idx)
	}
	if ch := rep.DefinitionChanges(); len(ch) > 0 {
		r.DefinitionChanges = ch
	}
	ign := map[string]map[string][]string{}
	for _, s := range servers {
		if len(s.ReplayIgnore) > 0 {
			ign[s.ID] = s.ReplayIgnore
		}
	}
	if len(ign) > 0 {
		r.IgnoreSHA256, _ = SumJCS(ign)
	}
	return r
}

// SumJCS returns the hex SHA-256 of the JCS form of v: how a record pins
// the ignore lists, and the outcomes or definition changes it leaves out.
func SumJCS(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	c, err := log.Canonicalize(b)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(c)
	return hex.EncodeToString(s[:]), nil
}

// Entry returns the log entry of r, refusing a record [ParseRecord] would
// refuse.
func (r *Record) Entry() (*log.Entry, error) {
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("replay entry: %w", err)
	}
	w := recordWire{Range: &recordRange{From: &r.From, To: &r.To}, Runs: &r.Runs, Counts: r.Counts,
		OutcomesSHA256: r.OutcomesSHA256, DefinitionChanges: r.DefinitionChanges,
		DefinitionChangesSHA256: r.DefinitionChangesSHA256, IgnoreSHA256: r.IgnoreSHA256}
	if r.Outcomes != nil {
		w.Outcomes = &r.Outcomes
	}
	if r.Definitions != nil {
		w.Definitions = &r.Definitions
	}
	e, err := log.NewEntry(KindReplay, r.Time, r.Actor, w)
	if err != nil {
		return nil, err
	}
	e.Auth = r.Auth
	return e, nil
}

// Marshal returns the canonical entry bytes of r. It fails as
// [log.Entry.Marshal] does (a record too large wraps
// [log.ErrEntryTooLarge]), and for a record [ParseRecord] would refuse.
func (r *Record) Marshal() ([]byte, error) {
	e, err := r.Entry()
	if err != nil {
		return nil, err
	}
	return e.Marshal()
}

// Fit makes r fit the log when its entry is too large: it pins the
// per-call outcomes by their hash (outcomes_sha256) and then, if the entry
// is still too large, the definition changes (definition_changes_sha256),
// keeping the counts. It returns the members it replaced, in that order.
// The entry's size depends on who writes it, so r's Actor and Auth must
// be those it will be written with. A record that fails otherwise is left
// for Marshal to refuse.
func (r *Record) Fit() (replaced []string) {
	return r.FitBy(func(r *Record) bool {
		_, err := r.Marshal()
		return !errors.Is(err, log.ErrEntryTooLarge)
	})
}

// FitBy is [Record.Fit] by another measure than the log's: fits reports
// whether r is small enough as it stands. It serves a writer that sends
// r to be written elsewhere under a limit of its own, and pins no more
// than that limit needs.
func (r *Record) FitBy(fits func(*Record) bool) (replaced []string) {
	if fits(r) {
		return nil
	}
	if sum, err := SumJCS(r.Outcomes); err == nil && r.Outcomes != nil {
		r.Outcomes, r.OutcomesSHA256 = nil, sum
		replaced = append(replaced, "outcomes")
	}
	if fits(r) {
		return replaced
	}
	if sum, err := SumJCS(r.DefinitionChanges); err == nil && r.DefinitionChanges != nil {
		r.DefinitionChanges, r.DefinitionChangesSHA256 = nil, sum
		replaced = append(replaced, "definition_changes")
	}
	return replaced
}

// ParseRecord reads a replay entry strictly (see [Record]): an entry any
// writer could have made, a client of record_replay included.
func ParseRecord(e *log.Entry) (*Record, error) {
	if e.Kind != KindReplay {
		return nil, fmt.Errorf("entry is a %q, not a replay entry", e.Kind)
	}
	for k, v := range e.Fields {
		if _, ok := recordMembers[k]; !ok {
			return nil, fmt.Errorf("replay entry has unexpected field %q", k)
		}
		if at, ok := findNull(v, k); ok {
			return nil, fmt.Errorf("replay entry: %s is null", at)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(recordMembers)) {
		if _, ok := e.Fields[k]; recordMembers[k] && !ok {
			return nil, fmt.Errorf("replay entry has no %q", k)
		}
	}
	for _, k := range []string{"outcomes_sha256", "definition_changes_sha256", "ignore_sha256"} {
		if v, ok := e.Fields[k]; ok && !isSum(v) {
			return nil, fmt.Errorf("replay entry: %s is not a lowercase hex SHA-256", k)
		}
	}
	// encoding/json takes a member in any case for a struct's field, and
	// DisallowUnknownFields lets such a one pass: the nested members are
	// held to their exact names here.
	if m, ok := e.Fields["range"].(map[string]any); ok {
		if err := onlyMembers(m, "range", "from", "to"); err != nil {
			return nil, fmt.Errorf("replay entry: %w", err)
		}
	}
	if v, ok := e.Fields["definition_changes"].([]any); ok {
		if err := changesComplete(v); err != nil {
			return nil, fmt.Errorf("replay entry: %w", err)
		}
	}
	var w recordWire
	if err := e.DecodeFields(&w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("replay entry: %s is a JSON %s, where %s belongs", te.Field, te.Value, jsonKind(te.Type))
		}
		return nil, err
	}
	if w.Range.From == nil || w.Range.To == nil {
		return nil, errors.New("replay entry: range must hold from and to")
	}
	r := &Record{Time: e.Time, Actor: e.Actor, Auth: e.Auth, From: *w.Range.From, To: *w.Range.To, Runs: *w.Runs,
		Counts: w.Counts, OutcomesSHA256: w.OutcomesSHA256, DefinitionChanges: w.DefinitionChanges,
		DefinitionChangesSHA256: w.DefinitionChangesSHA256, IgnoreSHA256: w.IgnoreSHA256}
	if w.Outcomes != nil {
		r.Outcomes = *w.Outcomes
	}
	if w.Definitions != nil {
		r.Definitions = *w.Definitions
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("replay entry: %w", err)
	}
	return r, nil
}

// changeMembers are the members of a definition change, every one
// required.
var changeMembers = []string{"server", "tool", "calls", "tool_sha256_then", "tool_sha256_now"}

// changesComplete checks that each of the definition changes holds every
// member, so that an absent one does not read as an empty one, and no
// other.
func changesComplete(list []any) error {
	if len(list) == 0 {
		return errors.New("definition_changes is empty; none is written by leaving it out")
	}
	for i, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			continue // DecodeFields says what it is
		}
		for _, k := range changeMembers {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("definition_changes[%d] has no %q", i, k)
			}
		}
		if err := onlyMembers(m, "definition_changes["+strconv.Itoa(i)+"]", changeMembers...); err != nil {
			return err
		}
	}
	return nil
}

// onlyMembers refuses a member of m, the object at, not named exactly
// among names.
func onlyMembers(m map[string]any, at string, names ...string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(names, k) {
			return fmt.Errorf("%s has unknown field %q", at, k)
		}
	}
	return nil
}

// check holds r to what [Report.Record] makes; see [Record].
func (r *Record) check() error {
	if r.From > r.To {
		return fmt.Errorf("range.from %d is past range.to %d", r.From, r.To)
	}
	if r.To > maxInt {
		return fmt.Errorf("range.to %d is past 2^53", r.To)
	}
	if r.Runs < 1 || r.Runs > maxInt {
		return fmt.Errorf("runs is %d, want at least 1 (and at most 2^53)", r.Runs)
	}
	if r.Counts == nil {
		return errors.New("counts are missing")
	}
	calls, err := total("counts", r.Counts, Classes, r.To-r.From)
	if err != nil {
		return err
	}
	if (r.Outcomes == nil) == (r.OutcomesSHA256 == "") {
		return errors.New("exactly one of outcomes and outcomes_sha256 must be set")
	}
	var named []span // the calls outcomes name, if it is set
	for c, s := range r.Outcomes {
		if !slices.Contains(Classes, c) {
			return fmt.Errorf("outcomes.%s: no such class (want one of %s)", c, strings.Join(Classes, ", "))
		}
		spans, n, err := readRanges(s, r.From, r.To)
		if err != nil {
			return fmt.Errorf("outcomes.%s: %w", c, err)
		}
		if n != uint64(r.Counts[c]) {
			return fmt.Errorf("outcomes.%s names %d calls, counts.%s is %d", c, n, c, r.Counts[c])
		}
		named = append(named, spans...)
	}
	// A call has one outcome: in one class.
	if i, twice := sortSpans(named); twice {
		return fmt.Errorf("outcomes name call %d twice", i)
	}
	if r.Outcomes != nil {
		for c, n := range r.Counts {
			if _, ok := r.Outcomes[c]; n > 0 && !ok {
				return fmt.Errorf("counts.%s is %d, and outcomes names none", c, n)
			}
		}
	}
	for _, s := range []string{r.OutcomesSHA256, r.DefinitionChangesSHA256, r.IgnoreSHA256} {
		if s != "" && !isSum(s) {
			return fmt.Errorf("%q is not a lowercase hex SHA-256", s)
		}
	}
	return r.checkDefinitions(calls, named)
}

// checkDefinitions holds the definition members to the calls counted,
// and the changes' calls to those outcomes names (named, sorted; nil if
// outcomes is not set, and then not checked).
func (r *Record) checkDefinitions(calls uint64, named []span) error {
	if r.DefinitionChanges != nil && r.DefinitionChangesSHA256 != "" {
		return errors.New("definition_changes and definition_changes_sha256 are both set")
	}
	if r.Definitions == nil {
		if r.DefinitionChanges != nil || r.DefinitionChangesSHA256 != "" {
			return errors.New("definition changes without definitions")
		}
		return nil
	}
	if _, err := total("definitions", r.Definitions, Definitions, calls); err != nil {
		return err
	}
	if r.DefinitionChangesSHA256 != "" {
		return nil
	}
	if r.DefinitionChanges != nil && len(r.DefinitionChanges) == 0 {
		return errors.New("definition_changes is empty; none is written by leaving it out")
	}
	var n uint64
	var changed []span
	for i, c := range r.DefinitionChanges {
		if c.Server == "" || c.Tool == "" {
			return fmt.Errorf("definition_changes[%d]: server and tool must be set", i)
		}
		if (c.Then != "" && !isSum(c.Then)) || (c.Now != "" && !isSum(c.Now)) {
			return fmt.Errorf("definition_changes[%d]: tool_sha256_then and tool_sha256_now must be lowercase hex SHA-256s or empty", i)
		}
		// Only a gone tool (now empty) can have been called under a
		// definition the call did not name.
		if c.Now != "" && (c.Then == "" || c.Then == c.Now) {
			return fmt.Errorf("definition_changes[%d]: tool_sha256_then %q and tool_sha256_now %q are no change", i, c.Then, c.Now)
		}
		spans, k, err := readRanges(c.Calls, r.From, r.To)
		if err != nil {
			return fmt.Errorf("definition_changes[%d].calls: %w", i, err)
		}
		// A change is of calls replayed, each with its outcome.
		if r.Outcomes != nil {
			for _, s := range spans {
				if j, ok := covered(named, s); !ok {
					return fmt.Errorf("definition_changes[%d].calls: call %d is named by no outcome", i, j)
				}
			}
		}
		n += k
		changed = append(changed, spans...)
	}
	// A call was made under one definition: in one change.
	if i, twice := sortSpans(changed); twice {
		return fmt.Errorf("definition_changes name call %d twice", i)
	}
	if want := uint64(r.Definitions[DefinitionChanged]) + uint64(r.Definitions[DefinitionGone]); n != want {
		return fmt.Errorf("definition_changes name %d calls, definitions count %d changed or gone", n, want)
	}
	return nil
}

// A span is the log indices lo to hi, both included.
type span struct{ lo, hi uint64 }

// sortSpans sorts spans by their start and reports an index two of them
// hold, if any do.
func sortSpans(spans []span) (uint64, bool) {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	for i := 1; i < len(spans); i++ {
		// Sorted, a span overlapping any before it overlaps the one
		// right before it, or that one overlapped an earlier one.
		if spans[i].lo <= spans[i-1].hi {
			return spans[i].lo, true
		}
	}
	return 0, false
}

// covered reports whether the sorted, disjoint spans hold every index of
// s, and if not, one they do not hold.
func covered(spans []span, s span) (uint64, bool) {
	// k is how many spans start at or before s.lo.
	k, _ := slices.BinarySearchFunc(spans, s.lo, func(x span, i uint64) int { return cmp.Compare(x.lo, i+1) })
	at := s.lo
	for k--; k >= 0 && k < len(spans) && spans[k].lo <= at && at <= spans[k].hi; k++ {
		if spans[k].hi >= s.hi {
			return 0, true
		}
		at = spans[k].hi + 1
	}
	return at, false
}

// total checks that counts has only keys among known and no negative
// value, and returns their sum, which may not exceed most.
func total(what string, counts map[string]int, known []string, most uint64) (uint64, error) {
	var sum uint64
	for k, n := range counts {
		if !slices.Contains(known, k) {
			return 0, fmt.Errorf("%s.%s: unknown (want one of %s)", what, k, strings.Join(known, ", "))
		}
		if n < 0 {
			return 0, fmt.Errorf("%s.%s is %d, below zero", what, k, n)
		}
		if uint64(n) > most-sum {
			return 0, fmt.Errorf("%s add up to more than %d calls", what, most)
		}
		sum += uint64(n)
	}
	return sum, nil
}

// readRanges returns the spans s names and how many indices they hold,
// s written as [Ranges] writes it (ascending, runs of consecutive indices
// joined, no leading zeros), every index in [from, to). It refuses any
// other spelling, so a record has one form.
func readRanges(s string, from, to uint64) ([]span, uint64, error) {
	if s == "" {
		return nil, 0, errors.New("empty; a class without calls is left out")
	}
	var spans []span
	var n, last uint64
	for i, item := range strings.Split(s, ",") {
		lo, hi, isRun := strings.Cut(item, "-")
		a, err := index(lo)
		if err != nil {
			return nil, 0, err
		}
		b := a
		if isRun {
			if b, err = index(hi); err != nil {
				return nil, 0, err
			}
			if b <= a {
				return nil, 0, fmt.Errorf("run %q does not ascend", item)
			}
		}
		// An index right after the last run's would have joined it.
		if (i > 0 && a <= last+1) || a < from || b >= to {
			return nil, 0, fmt.Errorf("%q is out of order, joins the run before it, or lies outside the range [%d, %d)", item, from, to)
		}
		n += b - a + 1
		last = b
		spans = append(spans, span{a, b})
	}
	return spans, n, nil
}

func index(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("%q is not a log index", s)
	}
	return n, nil
}

// jsonKind names what JSON value decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Int, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	default:
		return "an object"
	}
}

func isSum(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) != 64 {
		return false
	}
	b, err := hex.DecodeString(s)
	return err == nil && hex.EncodeToString(b) == s
}

// findNull returns the path of a null in v, which is at, if there is one.
// encoding/json decodes null into a zero value without a word, which
// would let a client's null pass for a 0 or an empty string. The path is
// built only for a null found, on the way back up: built for every value
// visited, it cost the square of the nesting depth.
func findNull(v any, at string) (string, bool) {
	var steps []string // the path's steps, innermost first
	var find func(v any) bool
	find = func(v any) bool {
		switch x := v.(type) {
		case nil:
			return true
		case map[string]any:
			for k, e := range x {
				if find(e) {
					steps = append(steps, "."+k)
					return true
				}
			}
		case []any:
			for i, e := range x {
				if find(e) {
					steps = append(steps, "["+strconv.Itoa(i)+"]")
					return true
				}
			}
		}
		return false
	}
	if !find(v) {
		return "", false
	}
	slices.Reverse(steps)
	return at + strings.Join(steps, ""), true
}

// Ranges writes sorted indices compactly: "1-3,7".
func Ranges(idx []uint64) string {
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	var sb strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatUint(idx[i], 10))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.FormatUint(idx[j], 10))
		}
		i = j + 1
	}
	return sb.String()
}

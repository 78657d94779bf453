package replay

import (
	"fmt"
	"maps"
	"slices"
)

// callsChunk is how many entries CheckCalls asks for at a time.
const callsChunk = 4096

// CheckCalls holds a record that [ParseRecord] took to the log it reports
// on: areCalls(lo, hi) says, for each entry of [lo, hi), whether it is a
// call entry. Each index the outcomes and definition changes name must be
// a call, so a client of record_replay cannot report a replay of the
// genesis entry, a call's result or a task entry, and the counts may add
// up to no more calls than the range holds.
//
// The entries read are those the record names, not the range: with
// outcomes set, the counts are the calls they name, each once
// ([ParseRecord]), so that those are calls bounds the counts; only a
// record with outcomes_sha256 has its calls counted in the range, from
// its start until there are as many as it counts.
func (r *Record) CheckCalls(areCalls func(lo, hi uint64) ([]bool, error)) error {
	// spanCalls checks that every entry of [lo, hi] is a call.
	spanCalls := func(what string, lo, hi uint64) error {
		for start := lo; start <= hi; start += callsChunk {
			end := min(hi+1, start+callsChunk)
			is, err := areCalls(start, end)
			if err != nil {
				return err
			}
			if uint64(len(is)) != end-start {
				return fmt.Errorf("%s: entries [%d, %d) were read as %d entries", what, start, end, len(is))
			}
			for j, ok := range is {
				if !ok {
					return fmt.Errorf("%s names entry %d, which is not a call", what, start+uint64(j))
				}
			}
		}
		return nil
	}
	check := func(what, s string) error {
		spans, _, err := readRanges(s, r.From, r.To)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, sp := range spans {
			if err := spanCalls(what, sp.lo, sp.hi); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range slices.Sorted(maps.Keys(r.Outcomes)) {
		if err := check("outcomes."+c, r.Outcomes[c]); err != nil {
			return err
		}
	}
	if r.Outcomes != nil {
		// The definition changes name calls among the outcomes'
		// (ParseRecord), checked above; the counts are theirs.
		return nil
	}
	for i, c := range r.DefinitionChanges {
		if err := check(fmt.Sprintf("definition_changes[%d].calls", i), c.Calls); err != nil {
			return err
		}
	}
	var n uint64
	for _, c := range r.Counts {
		n += uint64(c)
	}
	var calls uint64
	// Each entry is at most one call: the calls still to find are as
	// many entries as need reading at least. A read past that doubles,
	// so that a range of few calls takes few reads, and the entries read
	// are at most twice those up to the last call counted.
	var chunk uint64
	for start := r.From; start < r.To && calls < n; {
		chunk = min(callsChunk, max(n-calls, 2*chunk))
		end := min(r.To, start+chunk)
		is, err := areCalls(start, end)
		if err != nil {
			return err
		}
		if uint64(len(is)) != end-start {
			return fmt.Errorf("entries [%d, %d) were read as %d entries", start, end, len(is))
		}
		start = end
		for _, ok := range is {
			if ok {
				calls++
			}
		}
	}
	if n > calls {
		return fmt.Errorf("counts add up to %d calls, but the range [%d, %d) holds %d calls", n, r.From, r.To, calls)
	}
	return nil
}

package replay

import (
	"fmt"
	"maps"
	"slices"
)

// CheckCalls holds a record that [ParseRecord] took to the log it reports
// on: isCall says whether the entry at an index of [From, To) is a call
// entry, of which the range holds calls. The counts may add up to no
// more than calls, and each index the outcomes and definition changes
// name must be a call: a client of record_replay cannot report a replay
// of the genesis entry, a call's result or a task entry.
func (r *Record) CheckCalls(calls uint64, isCall func(uint64) bool) error {
	check := func(what, s string) error {
		spans, _, err := readRanges(s, r.From, r.To)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, sp := range spans {
			for i := sp.lo; i <= sp.hi; i++ {
				if !isCall(i) {
					return fmt.Errorf("%s names entry %d, which is not a call", what, i)
				}
			}
		}
		return nil
	}
	for _, c := range slices.Sorted(maps.Keys(r.Outcomes)) {
		if err := check("outcomes."+c, r.Outcomes[c]); err != nil {
			return err
		}
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
	if n > calls {
		return fmt.Errorf("counts add up to %d calls, but the range [%d, %d) holds %d calls", n, r.From, r.To, calls)
	}
	return nil
}

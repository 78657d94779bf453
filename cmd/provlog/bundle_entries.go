package main

import (
	"context"
	"fmt"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/opp"
)

// bundleTasks rebuilds the tasks from a bundle's entries and holds their
// entries to the ownership and provenance rules, as audit does with the
// log: the problems are the entries that break one. The rules need every
// task entry from the log's first; a bundle that starts later is not
// checked, and the text says so.
func bundleTasks(ctx context.Context, be *bundle.Entries, m *bundle.Manifest) (string, *log.ProblemsError, error) {
	if m.From > 0 {
		return fmt.Sprintf("the ownership and provenance rules not applied (the bundle starts at entry %d; they need the log from its first)", m.From), nil, nil
	}
	tasks, err := opp.Rebuild(ctx, be, m.To)
	if err != nil {
		return "", nil, fmt.Errorf("rebuilding the tasks from the bundle's entries: %w", err)
	}
	if vs := tasks.Violations(); len(vs) > 0 {
		pe := &log.ProblemsError{What: "task entries"}
		for _, v := range vs {
			pe.Problems = append(pe.Problems, v.Problem())
		}
		return "", pe, nil
	}
	return fmt.Sprintf("%d rebuilt from the entries, none breaking the ownership and provenance rules", tasks.Len()), nil, nil
}

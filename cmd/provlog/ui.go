package main

// The auditor's view (log/server/ui) wired to a running sidecar: the page
// under /ui/ and the task lookup it reads at /log/task/<id>.

import (
	"context"
	"fmt"
	"net/http"

	"github.com/provlog/provlog/log/server/ui"
	"github.com/provlog/provlog/opp"
)

// handleUI adds /ui/ and /log/task/ to mux.
func (s *sidecar) handleUI(mux *http.ServeMux, authorized func(*http.Request) bool) {
	var witnesses []string
	for _, w := range s.cfg.Witnesses {
		witnesses = append(witnesses, w.VKey)
	}
	page := ui.Handler(ui.Info{VKey: s.keys.vkey, Witnesses: witnesses, Source: "sidecar"})
	mux.Handle("/ui", page)
	mux.Handle("/ui/", page)
	mux.Handle("/log/task/", traceLogAPI(s.tracer, s.authn.Challenger(ui.TaskHandler(engineLookup(s.tasks), authorized))))
}

// engineLookup answers task lookups from the task engine's state.
func engineLookup(e *opp.Engine) ui.TaskLookup {
	return func(ctx context.Context, id string) (any, error) {
		t, err := e.Status(ctx, id)
		if re, ok := opp.Refusal(err); ok && re.Rule == opp.RuleUnknownTask {
			return nil, fmt.Errorf("%w: %s", ui.ErrNoTask, re.Msg)
		}
		return t, err
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/proxy/replay"
)

func runTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tasks", stderr)
	lf := addLogFlags(fs, "", "")
	if err := parseFlags(fs, args, 2); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	verb, id := "list", ""
	switch fs.NArg() {
	case 0:
	case 1:
		verb = fs.Arg(0)
	case 2:
		verb, id = fs.Arg(0), fs.Arg(1)
	}
	if !(verb == "list" && id == "") && !(verb == "show" && id != "") {
		return usageErr("say 'list' or 'show TASK_ID'")
	}
	var src interface {
		opp.EntryReader
		log.AuditSource
	}
	if lf.data != "" {
		s, err := openStore(lf.data, true)
		if err != nil {
			return err
		}
		defer s.Close()
		src = s
	} else {
		src = newRemote(lf.url, lf.token)
		// The entries come as the sidecar serves them, checked against
		// no key: say so, and what checks them.
		fmt.Fprintf(stderr, "note: tasks as %s serves its entries, not checked against the log's key (provlog audit --log %s --vkey KEY checks them)\n", log.RedactURL(lf.url), log.RedactURL(lf.url))
	}
	var size uint64
	if err := src.Checkpoints(ctx, 0, func(n uint64, _ []byte) error { size = n; return nil }); err != nil {
		return err
	}
	st, err := opp.Rebuild(ctx, src, size)
	if err != nil {
		return err
	}
	for _, v := range st.Violations() {
		fmt.Fprintf(stderr, "warning: ignored (breaks a rule): %s\n", v.String())
	}
	calls, err := trackCalls(ctx, src, size)
	if err != nil {
		return err
	}
	if verb == "list" {
		if err := opp.FormatList(stdout, st.All(ctx), time.Now()); err != nil {
			return err
		}
		if open := calls.Open(); len(open) > 0 {
			fmt.Fprintf(stdout, "\n%d of %d calls have no recorded outcome (cut off by a crash or kill, refused when the log failed while recording it, or under way): entries %s\n",
				len(open), calls.Calls(), replay.Ranges(open))
		}
		return nil
	}
	t, err := st.Task(ctx, id)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("no task %q in the log (of size %d)", id, size)
	}
	if err := opp.FormatTask(stdout, t); err != nil {
		return err
	}
	for _, ev := range t.History {
		for _, x := range ev.Evidence {
			if calls.IsOpen(x) {
				fmt.Fprintf(stdout, "\nnote: evidence #%d of claim #%d is a call with no recorded outcome (cut off by a crash or kill, refused when the log failed while recording it, or under way)\n", x, ev.Index)
			}
		}
	}
	return nil
}

// trackCalls reads the log's first size entries and pairs its calls with
// their outcomes.
func trackCalls(ctx context.Context, src log.AuditSource, size uint64) (*log.CallTracker, error) {
	var t log.CallTracker
	for start := uint64(0); start < size; {
		end := min(start+4096, size)
		es, err := src.Entries(ctx, start, end)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return nil, fmt.Errorf("reading entries from %d: none returned", start)
		}
		for _, b := range es {
			e, err := log.ParseEntry(b)
			if err == nil {
				err = t.Add(start, e)
			}
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", start, err)
			}
			start++
		}
	}
	return &t, nil
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/provlog/provlog/opp"
)

// TestTasksIndexAcrossRestart: serve saves the task index at shutdown and
// the next start resumes from it, with the tasks as they were; a deleted
// index costs a replay of the log, nothing more.
func TestTasksIndexAcrossRestart(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	cfg := &Config{Data: data, Actor: "local"}
	sc := mustOpenSidecar(t, cfg)
	r, err := sc.tasks.Create(ctx, "alice", opp.CreateArgs{Title: "across a restart"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.tasks.Accept(ctx, "bob", r.Task.ID); err != nil {
		t.Fatal(err)
	}
	size := sc.size()
	sc.close()
	if _, err := os.Stat(filepath.Join(data, tasksIndexFile)); err != nil {
		t.Fatalf("no task index saved at shutdown: %v", err)
	}
	for _, saved := range []bool{true, false} {
		if !saved {
			os.Remove(filepath.Join(data, tasksIndexFile))
		}
		sc = mustOpenSidecar(t, cfg)
		from, err := sc.tasks.Resumed()
		if saved && (from != size || err != nil) || !saved && from != 0 {
			t.Fatalf("saved index %v: resumed from %d (%v), the log holds %d", saved, from, err, size)
		}
		st, err := sc.tasks.Status(ctx, r.Task.ID)
		if err != nil || st.Owner != "bob" || len(st.History) != 2 {
			t.Fatalf("saved index %v: task after restart: %+v, %v", saved, st, err)
		}
		sc.close()
	}
}

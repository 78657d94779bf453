package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// TestAuditViolationEscapes: `provlog audit` and `provlog tasks` print
// each task entry that breaks a rule, and the rules' messages quote the
// log's own strings ("task %s is owned by %s"). A log whose writer gave an
// actor holding terminal escapes (a window title, an erased line above, a
// clipboard write) must not have them run on the auditor's terminal: the
// problems print through log.Problem's String, which escapes them with
// log.Printable, as opp's FormatTask and FormatList do.
func TestAuditViolationEscapes(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf("data: %s\norigin: provlog.example/escape\nactor: alice\n", data))
	sc := mustOpenSidecar(t, cfg)
	ctx := context.Background()
	const hostile = "mallory\x1b]0;audit passed\x07\x1b[1A\x1b[2K\x1b]52;c;cm0gLXJmIH4=\x07"
	id := "t_" + strings.Repeat("ab", 16)
	now := time.Now().UTC()
	for _, e := range []*log.Entry{
		{Kind: log.KindTaskCreate, Time: now, Actor: "alice", Fields: map[string]any{"task_id": id, "title": "ship it"}},
		{Kind: log.KindTaskAccept, Time: now, Actor: "forged", Fields: map[string]any{"task_id": id}},
		// A second accept, by another actor, while the hostile one owns
		// the task: a violation whose message names the owner.
		{Kind: log.KindTaskAccept, Time: now, Actor: "bob", Fields: map[string]any{"task_id": id}},
	} {
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if e.Actor == "forged" {
			b = withActor(t, b, hostile)
		}
		if _, err := sc.seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	sc.close()
	for _, args := range [][]string{{"audit", "--data", data}, {"tasks", "--data", data, "list"}} {
		var out, errb bytes.Buffer
		code := run(ctx, args, &out, &errb)
		all := out.String() + errb.String()
		if !strings.Contains(all, "owned by") {
			t.Fatalf("provlog %s (exit %d) reports no violation naming the owner: %s", args[0], code, all)
		}
		if i := strings.IndexByte(all, 0x1b); i >= 0 {
			t.Errorf("provlog %s prints a terminal escape from the log raw to the auditor: %q", args[0], all[max(0, i-80):min(len(all), i+60)])
		}
	}
}

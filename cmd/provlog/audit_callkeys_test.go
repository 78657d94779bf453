package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/opp"
)

// TestAuditSharedCallKeys: an observed claim on a shared log is fenced on
// the call it cites too, whose fence key row (call:<index>) audit checks:
// it agrees with the entries as written, and a row for a call no observed
// claim cites, put in by hand, is named.
func TestAuditSharedCallKeys(t *testing.T) {
	ctx := context.Background()
	var call, claim uint64
	dsn, audit := sharedAudit(t, func(sc *sidecar) {
		appendEntry := func(e interface{ Marshal() ([]byte, error) }) uint64 {
			b, err := e.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			rc, err := sc.seq.Append(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			return rc.Index
		}
		id := mustResult(t)(sc.tasks.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
		mustResult(t)(sc.tasks.Accept(ctx, "bob", id))
		call = appendEntry(&log.CallEntry{Time: time.Now(), Actor: "bob", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)})
		appendEntry(&log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: call, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
		claim = mustResult(t)(sc.tasks.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done", Evidence: []uint64{call}})).Index
	})
	rows := pgtest.Psql(t, dsn, "SELECT key || '=' || last FROM provlog_keys ORDER BY key")
	if want := fmt.Sprintf("%s=%d", opp.CallKey(call), claim); !strings.Contains(rows, want) {
		t.Fatalf("fence key rows after an observed claim citing call %d:\n%s\nwant a row %s", call, rows, want)
	}
	if code, out := audit(); code != 0 || !strings.Contains(out, "fence keys: 3 rows agree with the entries") {
		t.Fatalf("audit of the intact log: exit %d, want 0 and its 3 fence keys checked\n%s", code, out)
	}
	pgtest.Psql(t, dsn, fmt.Sprintf("INSERT INTO provlog_keys (key, last) VALUES ('%s', %d)", opp.CallKey(claim), claim))
	want := fmt.Sprintf(`fence key "%s": names entry %d, but no observed claim in the log's first`, opp.CallKey(claim), claim)
	if code, out := audit(); code == 0 || !strings.Contains(out, want) {
		t.Fatalf("audit after a call's fence key row put in by hand: exit %d, want a failure naming %q:\n%s", code, want, out)
	}
}

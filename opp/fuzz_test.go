package opp

import (
	"testing"
	"time"
)

// FuzzParseRecord feeds arbitrary bytes to the task entry parser that
// Rebuild runs over logs it may not trust (provlog audit --log URL). It must
// never panic, and a record it accepts must encode back to an entry that
// parses to the same record.
func FuzzParseRecord(f *testing.F) {
	seeds := []*record{
		{kind: KindCreate, actor: "alice", taskID: "t_00000000000000000000000000000000", title: "t", description: "d", offerTo: "bob"},
		{kind: KindAccept, actor: "bob", taskID: "t_00000000000000000000000000000000"},
		{kind: KindClaim, actor: "bob", taskID: "t_00000000000000000000000000000000", provenance: Observed, summary: "s", evidence: []uint64{1, 2}, source: "x"},
		{kind: KindHandoff, actor: "bob", taskID: "t_00000000000000000000000000000000", to: "carol", note: "n",
			snapshot: &Snapshot{State: string(StateAccepted), Owner: "bob", HistoryHead: EntryRef{Index: 3, LeafHash: "ab"}, Claims: []ClaimRef{}}},
		{kind: KindRelease, actor: "bob", taskID: "t_00000000000000000000000000000000"},
		{kind: KindCancel, actor: "alice", taskID: "t_00000000000000000000000000000000", note: "n"},
	}
	for _, r := range seeds {
		r.time = time.Unix(1, 2).UTC()
		b, err := r.marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"actor":"a","kind":"task.claim","provenance":["observed"],"summary":"s","task_id":"t","time":"2026-01-01T00:00:00.000000000Z","v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isTaskEntry(b) {
			return
		}
		r, err := parseRecord(b)
		if err != nil || r == nil {
			return
		}
		b2, err := r.marshal()
		if err != nil {
			return // e.g. an empty optional field written explicitly
		}
		r2, err := parseRecord(b2)
		if err != nil || r2 == nil || r2.kind != r.kind || r2.taskID != r.taskID || r2.actor != r.actor {
			t.Fatalf("re-encoded record does not parse back: %v\n%s\n%s", err, b, b2)
		}
	})
}

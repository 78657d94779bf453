package log_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

func taskSeeds() []*log.TaskEntry {
	id := "t_00000000000000000000000000000000"
	at := time.Unix(1, 2).UTC()
	return []*log.TaskEntry{
		{Kind: log.KindTaskCreate, Time: at, Actor: "alice", TaskID: id, Title: "t", Description: "d", OfferTo: "bob"},
		{Kind: log.KindTaskCreate, Time: at, Actor: "alice", TaskID: id, Title: "t"},
		{Kind: log.KindTaskAccept, Time: at, Actor: "bob", TaskID: id},
		{Kind: log.KindTaskAccept, Time: at, Actor: "bob", TaskID: id,
			Auth: &log.Auth{Issuer: "https://idp.example", Subject: "bob", ClientID: "agent", TokenSHA256: strings.Repeat("ab", 32), Via: log.AuthViaJWT}},
		{Kind: log.KindTaskClaim, Time: at, Actor: "bob", TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{1, 2}, Source: "x"},
		{Kind: log.KindTaskHandoff, Time: at, Actor: "bob", TaskID: id, To: "carol", Note: "n",
			Snapshot: &log.TaskSnapshot{State: "accepted", Owner: "bob", HistoryHead: log.TaskEntryRef{Index: 3, LeafHash: "ab"},
				Claims: []log.TaskClaimRef{{Index: 2, LeafHash: "cd", Actor: "bob", Provenance: "reported"}}}},
		{Kind: log.KindTaskRelease, Time: at, Actor: "bob", TaskID: id},
		{Kind: log.KindTaskClaim, Time: at, Actor: "bob", TaskID: id, Provenance: "reported", Summary: "s", Source: "x",
			Prev: &log.TaskEntryRef{Index: 4, LeafHash: strings.Repeat("0f", 32)}},
		{Kind: log.KindTaskCancel, Time: at, Actor: "alice", TaskID: id, Note: "n"},
	}
}

// TestTaskEntryRoundTrip: every task kind parses back to what was
// marshalled, and its bytes hold exactly the members DESIGN §7 names.
func TestTaskEntryRoundTrip(t *testing.T) {
	for _, te := range taskSeeds() {
		b, err := te.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", te.Kind, err)
		}
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := log.ParseTask(e)
		if err != nil {
			t.Fatalf("%s: %v\n%s", te.Kind, err, b)
		}
		if !reflect.DeepEqual(got, te) {
			t.Errorf("%s: parsed back as %+v, want %+v", te.Kind, got, te)
		}
	}
	b, _ := taskSeeds()[2].Marshal()
	if want := `{"actor":"bob","kind":"task.accept","task_id":"t_00000000000000000000000000000000","time":"1970-01-01T00:00:01.000000002Z","v":1}`; string(b) != want {
		t.Errorf("accept entry is\n%s, want\n%s", b, want)
	}
}

// TestTaskEntryRefusals: what ParseTask and Marshal refuse, and why.
func TestTaskEntryRefusals(t *testing.T) {
	const head = `{"actor":"a",`
	const tail = `"time":"2026-01-01T00:00:00.000000000Z","v":1}`
	for _, c := range []struct{ entry, want string }{
		{`"kind":"task.accept","task_id":"t","title":"x",`, `unexpected field "title"`},
		{`"kind":"task.create","task_id":"t",`, `no "title"`},
		{`"kind":"task.claim","provenance":["observed"],"summary":"s","task_id":"t",`, `"provenance": not a string`},
		{`"kind":"task.claim","evidence":[],"provenance":"observed","summary":"s","task_id":"t",`, "empty evidence"},
		{`"kind":"task.claim","evidence":[-1],"provenance":"observed","summary":"s","task_id":"t",`, "other than a log index"},
		{`"kind":"task.handoff","snapshot":{"state":"accepted","x":1},"task_id":"t","to":"b",`, `unknown field "x"`},
		{`"kind":"task.accept","task_id":null,`, "is null"},
		{`"kind":"task.create","prev":{"index":1,"leaf_hash":"` + strings.Repeat("ab", 32) + `"},"task_id":"t","title":"x",`, `unexpected field "prev"`},
		{`"kind":"task.accept","prev":{"index":1,"leaf_hash":"` + strings.Repeat("AB", 32) + `"},"task_id":"t",`, "not 64 lowercase hex"},
		{`"kind":"task.accept","prev":{"index":1,"leaf_hash":"ab"},"task_id":"t",`, "not 64 lowercase hex"},
		{`"kind":"task.accept","prev":{"index":1,"leaf_hash":"` + strings.Repeat("ab", 32) + `","x":1},"task_id":"t",`, `unknown field "x"`},
		{`"kind":"task.accept","prev":1,"task_id":"t",`, `"prev"`},
		{`"kind":"task.other","task_id":"t",`, "not a task entry"},
	} {
		b, err := log.Canonicalize([]byte(head + c.entry + tail))
		if err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		if _, err := log.ParseTask(e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", c.entry, err, c.want)
		}
	}
	for _, te := range []*log.TaskEntry{
		{Kind: "task.other", TaskID: "t"},
		{Kind: log.KindTaskAccept, TaskID: "t", Note: "accept carries no note"},
		{Kind: log.KindTaskHandoff, TaskID: "t", To: "b"},
	} {
		if _, err := te.Marshal(); err == nil {
			t.Errorf("Marshal of %+v succeeded", te)
		}
	}
}

// FuzzParseTask: ParseTask never panics on entries the log accepts, and an
// entry it reads marshals back to one that reads the same.
func FuzzParseTask(f *testing.F) {
	for _, te := range taskSeeds() {
		b, err := te.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := log.ParseEntry(b)
		if err != nil {
			return
		}
		te, err := log.ParseTask(e)
		if err != nil {
			return
		}
		b2, err := te.Marshal()
		if err != nil {
			return // e.g. a handoff without a snapshot, which only the rules refuse
		}
		e2, err := log.ParseEntry(b2)
		if err != nil {
			t.Fatalf("Marshal wrote an entry that does not parse: %v\n%s", err, b2)
		}
		te2, err := log.ParseTask(e2)
		if err != nil || !reflect.DeepEqual(te, te2) {
			t.Fatalf("re-encoded task entry reads differently: %v\n%s\n%s", err, b, b2)
		}
	})
}

package opp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
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

// entryList is a log of fixed entries, for FuzzLoadSnapshot.
type entryList [][]byte

func (l entryList) Entries(_ context.Context, start, end uint64) ([][]byte, error) {
	if end > uint64(len(l)) || start > end {
		return nil, log.ErrNotFound
	}
	return l[start:end], nil
}

// FuzzLoadSnapshot feeds arbitrary bytes to the task index snapshot
// loader, which reads a file from the data dir: it must never panic, and
// must refuse or load without reading past what the file holds.
func FuzzLoadSnapshot(f *testing.F) {
	call, err := (&log.CallEntry{Time: time.Unix(0, 0), Actor: "a", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal()
	if err != nil {
		f.Fatal(err)
	}
	entries := entryList{[]byte(`{"actor":"a","kind":"genesis","time":"2026-01-01T00:00:00.000000000Z","v":1}`), call}
	ts := newTaskSet(entries, 0)
	ts.idx.add("t_00000000000000000000000000000001", 0)
	ts.idx.extend(0, 0, StateAccepted)
	path := filepath.Join(f.TempDir(), "idx")
	if err := writeSnapshot(path, 2, [32]byte(log.LeafHash(entries[1])), ts.idx, []Violation{{Index: 0, Kind: "x", Rule: "r", Msg: "m"}}, []uint64{1}, []uint64{1}, map[uint64]uint32{1: 0}); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "idx")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := newTaskSet(entries, 0)
		defer s.idx.mem.release()
		if n, err := s.loadSnapshot(context.Background(), p, uint64(len(entries))); err == nil && n > uint64(len(entries)) {
			t.Fatalf("loaded a snapshot of %d entries from a log of %d", n, len(entries))
		}
	})
}

// FuzzCallSetFailure feeds arbitrary bytes, as the entry after a call, to
// the calls the engine follows: it must never panic, and takes the call
// as failed only when the bytes are a call.result of the call's actor
// that log.ParseCallResult reads as a failure.
func FuzzCallSetFailure(f *testing.F) {
	call, err := (&log.CallEntry{Time: time.Unix(0, 0), Actor: "a", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal()
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range []*log.CallResultEntry{
		{Time: time.Unix(0, 0), Actor: "a", Call: 0, IsError: true, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2},
		{Time: time.Unix(0, 0), Actor: "a", Call: 0, Error: "boom", ErrorCode: -1},
		{Time: time.Unix(0, 0), Actor: "b", Call: 0, Error: "boom"},
		{Time: time.Unix(0, 0), Actor: "a", Call: 0, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2},
	} {
		b, err := r.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c callSet
		c.add(0, call)
		c.add(1, b)
		if !c.failed(0) {
			return
		}
		e, err := log.ParseEntry(b)
		if err != nil || e.Kind != log.KindCallResult || e.Actor != "a" {
			t.Fatalf("call taken as failed by %q", b)
		}
		if res, err := log.ParseCallResult(e); err != nil || res.Call != 0 || !res.IsError && res.Error == "" {
			t.Fatalf("call taken as failed by %q (%v)", b, err)
		}
	})
}

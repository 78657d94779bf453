package evidence_test

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// storeDated stores a record of the log's latest (cosigned) checkpoint
// whose one authority is a token by a TSA whose clock said at: a record
// as stored before anchor/online refused authorities far from the clock.
// The TSA's root joins the trusted ones.
func (l *testLog) storeDated(at time.Time) *anchor.Stored {
	l.t.Helper()
	_, msg := cosigningLog{l.seq, []note.Signer{l.signer, l.witness}}.Checkpoint()
	return l.storeRecord(msg, at)
}

// storeRecord stores a record of the checkpoint note msg whose one
// authority is a token dated at by a TSA of its own, whose root joins
// the trusted ones; each of change, if any, changes it first.
func (l *testLog) storeRecord(msg []byte, at time.Time, change ...func(*anchor.Record)) *anchor.Stored {
	l.t.Helper()
	cp, err := log.ParseCheckpointNote(msg)
	if err != nil {
		l.t.Fatal(err)
	}
	pki := testtsa.NewPKI(l.t, "Old TSA", true, at.Add(-time.Hour), time.Now().Add(time.Hour))
	digest := anchor.CheckpointDigest(msg)
	rec := &anchor.Record{V: anchor.RecordVersion, Checkpoint: string(msg), Origin: cp.Origin, Size: cp.Size, Root: cp.Hash,
		Digest: hex.EncodeToString(digest), AnchorKey: l.anchorKey, Tlogs: []*anchor.Tlog{}, Created: time.Now().UTC(),
		Timestamps: []*rfc3161.Token{pki.Token(l.t, "https://tsa.example/old", digest, at)}}
	for _, f := range change {
		f(rec)
	}
	st, err := l.records.Put(rec)
	if err != nil {
		l.t.Fatal(err)
	}
	l.trust = &anchor.Trust{TSARoots: append(slices.Clone(l.trust.TSARoots), pki.Root), RekorKeys: l.trust.RekorKeys}
	return st
}

func (l *testLog) appendAt(at time.Time, kind, actor string, fields map[string]any) uint64 {
	l.t.Helper()
	b, err := (&log.Entry{Kind: kind, Time: at, Actor: actor, Fields: fields}).Marshal()
	if err != nil {
		l.t.Fatal(err)
	}
	r, err := l.seq.Append(context.Background(), b)
	if err != nil {
		l.t.Fatal(err)
	}
	return r.Index
}

// TestAnchorBeforeEntry: evidence whose anchor is dated before an entry
// it proves in the anchored checkpoint, by more than the allowed skew,
// fails, naming the authority and its time, the entry and its time, and
// its file. (A token dated 2001 verified, and the report said an entry
// of 2026 was in the log by 2001.) Write no longer makes such evidence
// (TestSkipsAnchorBeforeEntry); WithoutTimeCheck makes it as it did.
func TestAnchorBeforeEntry(t *testing.T) {
	ctx := context.Background()
	t.Run("token dated 2001", func(t *testing.T) {
		l := newTestLog(t)
		written := time.Now()
		call := l.appendAt(written, log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		l.storeDated(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		dir := filepath.Join(t.TempDir(), "ev")
		if _, err := evidence.Write(ctx, dir, evidence.WithoutTimeCheck(l.options(call))); err != nil {
			t.Fatal(err)
		}
		_, err := evidence.Verify(ctx, dir, l.vkey)
		want := "anchor.json: timestamp 0 (https://tsa.example/old): time 2001-01-01T00:00:00Z is "
		entry := "before the time of entry " + itoa(call) + ", " + written.UTC().Format(log.TimeFormat)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), entry) || !strings.Contains(err.Error(), "(entry.json)") {
			t.Errorf("Verify: %v\nwant %q ... %q ... (entry.json)", err, want, entry)
		}
	})
	t.Run("token dated a minute before", func(t *testing.T) {
		l := newTestLog(t)
		call := l.appendAt(time.Now(), log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		l.storeDated(time.Now().Add(-time.Minute))
		dir := filepath.Join(t.TempDir(), "ev")
		m, err := evidence.Write(ctx, dir, l.options(call))
		if err != nil {
			t.Fatal(err)
		}
		if !m.Anchored {
			t.Errorf("an anchor within the skew was left out: %v", m.Missing)
		}
		if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
			t.Errorf("Verify: %v", err)
		}
	})
	t.Run("cited entry dated a year ahead", func(t *testing.T) {
		// The claim is on time; the call it cites, proven beside it in
		// the same checkpoint, is dated after both authorities.
		l := newTestLog(t)
		late := time.Now().AddDate(1, 0, 0)
		call := l.appendAt(late, log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "write x"})
		claim := l.append("task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "reported", "source": "x", "summary": "ok", "evidence": []uint64{call}})
		if _, err := l.runner.AnchorNow(ctx); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "ev")
		if _, err := evidence.Write(ctx, dir, evidence.WithoutTimeCheck(l.options(claim, create, call))); err != nil {
			t.Fatal(err)
		}
		_, err := evidence.Verify(ctx, dir, l.vkey)
		entry := "before the time of entry " + itoa(call) + ", " + late.UTC().Format(log.TimeFormat)
		for _, want := range []string{"anchor.json: timestamp 0 (", "anchor.json: rekor.v1 0 (", entry, "(context/" + itoa(call) + ".json)"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Verify: %v\nlacks %q", err, want)
			}
		}
	})
}

func itoa(i uint64) string { return strconv.FormatUint(i, 10) }

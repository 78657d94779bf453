package evidence_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// skips collects what Write's Skipped is told, one line a record.
type skips []string

func (s *skips) options(o evidence.Options) evidence.Options {
	o.Skipped = func(record string, why error) { *s = append(*s, record+": "+why.Error()) }
	return o
}

var y2001 = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// TestSkipsAnchorBeforeEntry: Write leaves out an anchor whose authority
// dates its checkpoint before an entry it covers (which Verify and
// provlog audit refuse), says so, and takes the next anchor that holds;
// with none, the directory says why it has no anchor, and verifies.
func TestSkipsAnchorBeforeEntry(t *testing.T) {
	ctx := context.Background()
	t.Run("a later anchor holds", func(t *testing.T) {
		l := newTestLog(t)
		call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		dated := l.storeDated(y2001)
		l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "read_file"})
		good, err := l.runner.AnchorNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var sk skips
		dir := filepath.Join(t.TempDir(), "ev")
		m, err := evidence.Write(ctx, dir, sk.options(l.options(call)))
		if err != nil {
			t.Fatal(err)
		}
		if !m.Anchored || m.Size != good.Record.Size || len(m.Missing) != 0 {
			t.Errorf("target size %d anchored %v missing %q; want the later anchor's size %d", m.Size, m.Anchored, m.Missing, good.Record.Size)
		}
		want := dated.Name + ": anchor record does not verify (1 problem): timestamp 0 (https://tsa.example/old): time 2001-01-01T00:00:00Z is "
		if len(sk) != 1 || !strings.HasPrefix(sk[0], want) || !strings.Contains(sk[0], "before the time of entry ") {
			t.Errorf("skipped %q, want one starting %q", sk, want)
		}
		if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
			t.Errorf("Verify: %v", err)
		}
	})
	t.Run("every anchor dated before an entry", func(t *testing.T) {
		l := newTestLog(t)
		written := time.Now()
		call := l.appendAt(written, log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		first := l.storeDated(y2001)
		l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "read_file"})
		l.storeDated(y2001.Add(time.Hour))
		var sk skips
		dir := filepath.Join(t.TempDir(), "ev")
		m, err := evidence.Write(ctx, dir, sk.options(l.options(call)))
		if err != nil {
			t.Fatal(err)
		}
		if len(sk) != 2 {
			t.Errorf("skipped %q, want both records", sk)
		}
		want := fmt.Sprintf("no anchor whose times hold covers the entry: the smallest anchor covering it, of size %d (skipped/anchor.json), was left out: timestamp 0 (https://tsa.example/old): time 2001-01-01T00:00:00Z is ", first.Record.Size)
		entry := "before the time of entry " + itoa(call) + ", " + written.UTC().Format(log.TimeFormat)
		if m.Anchored || len(m.Missing) == 0 || !strings.HasPrefix(m.Missing[0], want) || !strings.Contains(m.Missing[0], entry) {
			t.Fatalf("anchored %v, missing %q\nwant %q ... %q", m.Anchored, m.Missing, want, entry)
		}
		rep, err := evidence.Verify(ctx, dir, l.vkey)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if rep.Manifest.Anchored || !strings.Contains(rep.String(), "missing: "+m.Missing[0]) {
			t.Errorf("report:\n%s", rep)
		}
		flipEveryFile(t, dir, l.vkey, m)

	})
	t.Run("a skipped anchor whose times hold for the entry shown", func(t *testing.T) {
		// The directory shows an entry the skipped anchor's time is not
		// before: that is no reason to have left it out.
		l := newTestLog(t)
		call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		early := l.appendAt(y2001.Add(-time.Hour), log.KindCall, "alice", map[string]any{"server": "fs", "tool": "stat"})
		l.storeDated(y2001)
		dir := filepath.Join(t.TempDir(), "ev")
		if _, err := evidence.Write(ctx, dir, l.options(call)); err != nil {
			t.Fatal(err)
		}
		if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
			t.Fatalf("as written: %v", err)
		}
		showOnly(t, l, dir, early)
		_, err := evidence.Verify(ctx, dir, l.vkey)
		if err == nil || !strings.Contains(err.Error(), "skipped/anchor.json: no authority of it is dated before skipped/entry.json (entry "+itoa(early)+")") {
			t.Errorf("Verify of a skipped anchor whose times hold: %v", err)
		}
	})
	t.Run("an entry the evidence does not show is dated after the anchor", func(t *testing.T) {
		// Entry 1 is on time; entry 2, not in the directory, is dated a
		// year ahead of the anchor covering both: the anchor cannot
		// vouch for the checkpoint (provlog audit refuses it), though
		// the directory alone would not show why.
		l := newTestLog(t)
		call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
		late := l.appendAt(time.Now().AddDate(1, 0, 0), log.KindCall, "bob", map[string]any{"server": "fs", "tool": "read_file"})
		if _, err := l.runner.AnchorNow(ctx); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "ev")
		m, err := evidence.Write(ctx, dir, l.options(call))
		if err != nil {
			t.Fatal(err)
		}
		if m.Anchored || !strings.Contains(m.Missing[0], "before the time of entry "+itoa(late)) {
			t.Errorf("anchored %v, missing %q", m.Anchored, m.Missing)
		}
		if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
			t.Errorf("Verify: %v", err)
		}
	})
}

// showOnly puts entry i of the log and its proof in the checkpoint of
// the skipped record in place of the entry dir's skipped/ files show.
func showOnly(t *testing.T, l *testLog, dir string, i uint64) {
	t.Helper()
	ctx := context.Background()
	r, err := anchor.ParseRecord(mustRead(t, filepath.Join(dir, evidence.SkippedAnchorFile)))
	if err != nil {
		t.Fatal(err)
	}
	es, err := l.store.Entries(ctx, i, i+1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := log.ProveReceipt(ctx, l.store, i, r.Size, log.LeafHash(es[0]), []byte(r.Checkpoint))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, evidence.SkippedEntryFile), es[0], 0o644)
	os.WriteFile(filepath.Join(dir, evidence.SkippedProofFile), []byte(rc.String()), 0o644)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// badCosignature returns the log's latest cosigned checkpoint with the
// witness's cosignature changed so that it does not verify.
func (l *testLog) badCosignature() []byte {
	l.t.Helper()
	_, msg := cosigningLog{l.seq, []note.Signer{l.signer, l.witness}}.Checkpoint()
	lines := strings.Split(string(msg), "\n")
	for i, ln := range lines {
		if f := strings.Fields(ln); len(f) == 3 && f[1] == l.witness.Name() {
			sig, err := base64.StdEncoding.DecodeString(f[2])
			if err != nil {
				l.t.Fatal(err)
			}
			sig[len(sig)-1] ^= 1
			lines[i] = f[0] + " " + f[1] + " " + base64.StdEncoding.EncodeToString(sig)
			return []byte(strings.Join(lines, "\n"))
		}
	}
	l.t.Fatalf("no cosignature by %s in\n%s", l.witness.Name(), msg)
	return nil
}

// TestWrittenVerifies: whatever Write writes, Verify accepts (and
// VerifyPinned with the trust Write was given), and the manifest Write
// returns is the one Verify derives; over every entry
// of logs whose anchors hold, are dated before an entry they cover, are
// broken, or anchor checkpoints whose cosignatures do not verify.
func TestWrittenVerifies(t *testing.T) {
	ctx := context.Background()
	call := map[string]any{"server": "fs", "tool": "write_file"}
	scenarios := []struct {
		name  string
		build func(l *testLog)
		// noTrust leaves out the configured trust: each record is
		// checked against its own roots and keys; cosignedLatest gives
		// the log's latest checkpoint cosigned, and no other.
		noTrust, noWitnesses, cosignedLatest bool
	}{
		{name: "anchored, then more entries", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			l.anchorNow()
			l.append(log.KindCall, "alice", call)
		}},
		{name: "no witness policy", noWitnesses: true, build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			l.anchorNow()
			l.append(log.KindCall, "alice", call)
		}},
		{name: "token dated 2001, then an anchor that holds", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			l.storeDated(y2001)
			l.append(log.KindCall, "alice", call)
			l.anchorNow()
		}},
		{name: "only tokens dated 2001", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			l.storeDated(y2001)
			l.append(log.KindCall, "alice", call)
			l.storeDated(y2001)
		}},
		{name: "an entry dated a year ahead", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			l.appendAt(time.Now().AddDate(1, 0, 0), log.KindCall, "bob", call)
			l.anchorNow()
			l.append(log.KindCall, "alice", call)
			l.anchorNow()
		}},
		{name: "an anchored checkpoint whose cosignature does not verify", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			l.storeRecord(l.badCosignature(), time.Now())
		}},
		{name: "a broken token, checked against its own roots", noTrust: true, build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			_, msg := cosigningLog{l.seq, []note.Signer{l.signer, l.witness}}.Checkpoint()
			l.storeRecord(msg, time.Now(), func(r *anchor.Record) {
				tok := r.Timestamps[0].Token
				tok[len(tok)-1] ^= 1
			})
		}},
		{name: "a record not in its canonical form", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			st := l.storeDated(time.Now())
			var b bytes.Buffer
			if err := json.Indent(&b, st.Bytes, "", "  "); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(l.records.Dir(), st.Name), b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no anchor, the latest checkpoint cosigned", cosignedLatest: true, build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
		}},
		{name: "a token by a TSA the config does not trust", build: func(l *testLog) {
			l.append(log.KindCall, "alice", call)
			trust := l.trust
			l.storeDated(time.Now())
			l.trust = trust
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			l := newTestLog(t)
			sc.build(l)
			size, _ := l.seq.Checkpoint()
			for i := range size {
				o := l.options(i)
				if sc.noTrust {
					o.Trust = nil
				}
				if sc.noWitnesses {
					o.Witnesses, o.Threshold = nil, 0
				}
				if sc.cosignedLatest {
					_, o.Latest = cosigningLog{l.seq, []note.Signer{l.signer, l.witness}}.Checkpoint()
				}
				dir := filepath.Join(t.TempDir(), "ev"+itoa(i))
				m, err := evidence.Write(ctx, dir, o)
				if err != nil {
					t.Fatalf("entry %d: Write: %v", i, err)
				}
				rep, err := evidence.Verify(ctx, dir, l.vkey)
				if err != nil {
					t.Errorf("entry %d: Write wrote what Verify refuses: %v", i, err)
					continue
				}
				if got, want := fmt.Sprint(rep.Manifest.Anchored, rep.Manifest.Cosigned, rep.Manifest.Missing), fmt.Sprint(m.Anchored, m.Cosigned, m.Missing); got != want {
					t.Errorf("entry %d: Verify found %s, Write claimed %s", i, got, want)
				}
				// And under the trust the writer was configured with.
				if o.Trust != nil {
					pins := evidence.Pins{Witnesses: o.Witnesses, Threshold: o.Threshold, TSARoots: o.Trust.TSARoots, RekorKeys: o.Trust.RekorKeys}
					if _, err := evidence.VerifyPinned(ctx, dir, l.vkey, pins); err != nil {
						t.Errorf("entry %d: Write wrote what VerifyPinned with its trust refuses: %v", i, err)
					}
				}
			}
		})
	}
}

func (l *testLog) anchorNow() {
	l.t.Helper()
	if _, err := l.runner.AnchorNow(context.Background()); err != nil {
		l.t.Fatal(err)
	}
}

// TestClaimCitingAnotherTask: a reviewed claim may cite any entry, so
// its evidence holds another task's entry as a cited one, and verifies;
// another task's entry that no claim cites is refused, naming it.
func TestClaimCitingAnotherTask(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	other := l.append("task.create", "carol", map[string]any{"task_id": "t_2", "title": "other"})
	create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "review t_2"})
	claim := l.append("task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "reviewed", "summary": "ok", "evidence": []uint64{other}})
	l.anchorNow()
	dir := filepath.Join(t.TempDir(), "ev")
	if _, err := evidence.Write(ctx, dir, l.options(claim, create, other)); err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
		t.Errorf("Write wrote what Verify refuses: %v", err)
	}
	uncited := l.append("task.create", "carol", map[string]any{"task_id": "t_3", "title": "unrelated"})
	late := l.append("task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "reviewed", "summary": "ok", "evidence": []uint64{other}})
	l.anchorNow()
	dir = filepath.Join(t.TempDir(), "uncited")
	if _, err := evidence.Write(ctx, dir, l.options(late, create, other, uncited)); err != nil {
		t.Fatal(err)
	}
	_, err := evidence.Verify(ctx, dir, l.vkey)
	want := "context/" + itoa(uncited) + ".json: is an entry of task \"t_3\", not of the entry's task \"t_1\", and no claim here cites it"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Verify: %v\nwant %q", err, want)
	}
}

// TestUnreadableTime: an anchor covering an entry whose time cannot be
// read cannot be checked against it; Write says which entry, and writes
// nothing.
func TestUnreadableTime(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
	bad, err := l.seq.Append(ctx, []byte(`{"kind":"call","actor":"mallory"}`))
	if err != nil {
		t.Fatalf("the sequencer refuses an entry without a time: %v", err)
	}
	l.anchorNow()
	dir := filepath.Join(t.TempDir(), "ev")
	_, err = evidence.Write(ctx, dir, l.options(call))
	want := "entry " + itoa(bad.Index) + ": its time cannot be read"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Write: %v\nwant %q", err, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Write left %s behind: %v", dir, err)
	}
}

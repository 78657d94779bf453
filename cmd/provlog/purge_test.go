package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
)

// payloadLog is a data dir whose call entries keep payloads in blobs.
type payloadLog struct {
	data                         string
	aliceArgs, aliceRes, bobArgs string
	shared                       string // an old call's args and a new call's result
}

func appendEntry(t *testing.T, seq *server.Sequencer, e *log.Entry) uint64 {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := seq.Append(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(rc.Index)
}

func makePayloadLog(t *testing.T) *payloadLog {
	t.Helper()
	data := makeDataDir(t, 0)
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, false)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(context.Background(), store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := blobs.Open(filepath.Join(data, blobDir))
	put := func(s string) string {
		h, err := bs.Put([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	p := &payloadLog{data: data, aliceArgs: put(`{"q":"alice's secret"}`), aliceRes: put(`{"r":"alice's result"}`),
		bobArgs: put(`{"q":"bob"}`), shared: put(`{"r":"same bytes"}`)}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	call := func(at time.Time, actor, args string) uint64 {
		return appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: at, Actor: actor, Fields: map[string]any{
			"server": "s", "tool": "t", "args_sha256": args, "started": at.Format(log.TimeFormat)}})
	}
	result := func(at time.Time, actor string, c uint64, res string) {
		appendEntry(t, seq, &log.Entry{Kind: log.KindCallResult, Time: at, Actor: actor, Fields: map[string]any{
			"call": c, "result_sha256": res, "result_bytes": 10, "result_retained": true, "is_error": false, "duration_ns": 1}})
	}
	c := call(old, "alice", p.aliceArgs)
	result(old, "alice", c, p.aliceRes)
	call(old, "carol", p.shared)
	c = call(time.Now(), "bob", p.bobArgs)
	result(time.Now(), "bob", c, p.shared)
	seq.Close()
	store.Close()
	return p
}

func blobExists(data, h string) bool {
	bs, _ := blobs.Open(filepath.Join(data, blobDir))
	ok, _ := bs.Has(h)
	return ok
}

// TestPurge: erasure by actor and retention by age delete only what they
// select, record it first, and leave the log, its proofs and its audit
// intact; a blob gone without a purge entry, or changed, fails the audit.
func TestPurge(t *testing.T) {
	p := makePayloadLog(t)
	d := p.data
	if out, code := runCmd(t, "audit", "--data", d); code != 0 || !strings.Contains(out, "5 named by entries, 5 present and intact, 0 purged") {
		t.Fatalf("audit before: %s", out)
	}
	if out, code := runCmd(t, "purge", "--data", d, "--actor", "alice"); code != 2 || !strings.Contains(out, "--reason is required") {
		t.Fatalf("purge without a reason: %d %s", code, out)
	}
	out, code := runCmd(t, "purge", "--data", d, "--actor", "alice", "--reason", "erasure request #1", "--dry-run")
	if code != 0 || !strings.Contains(out, "would purge 2 blobs") || !blobExists(d, p.aliceArgs) {
		t.Fatalf("dry run: %s", out)
	}
	out, code = runCmd(t, "purge", "--data", d, "--actor", "alice", "--reason", "erasure request #1")
	if code != 0 || !strings.Contains(out, "purged 2 blobs; purge entries [6]") {
		t.Fatalf("purge --actor: %d %s", code, out)
	}
	if blobExists(d, p.aliceArgs) || blobExists(d, p.aliceRes) || !blobExists(d, p.bobArgs) || !blobExists(d, p.shared) {
		t.Fatal("purge --actor alice deleted the wrong blobs")
	}
	// The purge entry says what and why.
	s, _ := openStore(d, true)
	es, _ := s.Entries(context.Background(), 6, 7)
	s.Close()
	e, _ := log.ParseEntry(es[0])
	pe, err := blobs.ParsePurge(e)
	// By the operator, whose id no client may take (the stdio client's
	// default, "local", it once was).
	if err != nil || pe.Reason != "erasure request #1" || len(pe.Blobs) != 2 || e.Actor != operatorActor {
		t.Fatalf("purge entry: %v %+v %s", err, pe, es[0])
	}
	out, code = runCmd(t, "audit", "--data", d)
	if code != 0 || !strings.Contains(out, "3 present and intact, 2 purged") {
		t.Fatalf("audit after purge: %d %s", code, out)
	}
	// The proof of alice's call still verifies.
	rc, _ := runCmd(t, "prove", "--data", d, "--index", "1")
	rf := filepath.Join(t.TempDir(), "r")
	os.WriteFile(rf, []byte(rc), 0o600)
	if out, code := runCmd(t, "verify-proof", "--vkey", filepath.Join(d, logVKeyFile), rf); code != 0 {
		t.Fatalf("proof after purge: %s", out)
	}

	// Retention by age: carol's old call shares its blob with bob's new
	// result, so it stays.
	out, code = runCmd(t, "purge", "--data", d, "--older-than", "24h", "--reason", "retention: 1d")
	if code != 0 || !strings.Contains(out, "purged 0 blobs") || !strings.Contains(out, "kept 1 that newer entries still name") || !blobExists(d, p.shared) {
		t.Fatalf("purge --older-than: %d %s", code, out)
	}
	// It saved its age index for the next purge and the sidecar.
	if s, err := openStore(d, true); err != nil {
		t.Fatal(err)
	} else {
		st, _ := s.State(context.Background())
		var x ageIndex
		err := x.load(context.Background(), filepath.Join(d, retentionIndexFile), s, st.Size)
		s.Close()
		if err != nil || x.next == 0 || x.next > st.Size {
			t.Errorf("the age index purge --data saved: %v, %d of %d entries", err, x.next, st.Size)
		}
	}

	// A blob deleted behind the log's back, or changed, fails the audit.
	bs, _ := blobs.Open(filepath.Join(d, blobDir))
	os.Remove(filepath.Join(d, blobDir, p.bobArgs[:2], p.bobArgs))
	out, code = runCmd(t, "audit", "--data", d)
	if code != 1 || !strings.Contains(out, "missing (no purge entry after it covers it): entry 4: blob "+p.bobArgs) {
		t.Fatalf("audit with a missing blob: %d %s", code, out)
	}
	bs.Put([]byte(`{"q":"bob"}`))
	os.WriteFile(filepath.Join(d, blobDir, p.shared[:2], p.shared), []byte(`{"r":"other bytes"}`), 0o600)
	out, code = runCmd(t, "audit", "--data", d)
	if code != 1 || !strings.Contains(out, "tampered: entry 3: blob "+p.shared+" is corrupt") {
		t.Fatalf("audit with a changed blob: %d %s", code, out)
	}
}

// TestPurgeRunningSidecar: provlog purge --log asks the sidecar, which
// lets only the purgers' tokens do it; the sidecar's retention purges old
// payloads by itself; verify-bundle reports purged payloads as purged.
func TestPurgeRunningSidecar(t *testing.T) {
	p := makePayloadLog(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte("data: "+p.data+"\nretention: {max_age: 48h, interval: 50ms}\n"), 0o600)
	bob := addToken(t, cfg, "bob")
	base, stop := startServe(t, "--config", cfg)
	local, _ := os.ReadFile(filepath.Join(p.data, localToken))

	// Retention purges alice's old payloads (carol's is shared with a new entry).
	waitFor(t, "retention purged alice's old blobs", func() bool { return !blobExists(p.data, p.aliceArgs) && !blobExists(p.data, p.aliceRes) })
	if !blobExists(p.data, p.shared) {
		t.Fatal("retention deleted a blob a new entry names")
	}
	out, code := runCmd(t, "purge", "--log", base, "--token", bob, "--blob", p.bobArgs, "--reason", "bob asks")
	if code != 1 || !strings.Contains(out, `actor "bob" may not purge`) || !blobExists(p.data, p.bobArgs) {
		t.Fatalf("purge by a non-purger: %d %s", code, out)
	}
	out, code = runCmd(t, "purge", "--log", base, "--token", strings.TrimSpace(string(local)), "--blob", p.bobArgs, "--reason", "erasure request #2")
	if code != 0 || !strings.Contains(out, "purged 1 blobs") || blobExists(p.data, p.bobArgs) {
		t.Fatalf("purge --log: %d %s", code, out)
	}
	stop()
	out, code = runCmd(t, "audit", "--data", p.data)
	if code != 0 || !strings.Contains(out, "2 present and intact, 3 purged") {
		t.Fatalf("audit: %d %s", code, out)
	}
	s, _ := openStore(p.data, true)
	st, _ := s.State(context.Background())
	es, _ := s.Entries(context.Background(), 0, st.Size)
	s.Close()
	var actors []string
	for _, b := range es {
		if e, _ := log.ParseEntry(b); e != nil && e.Kind == blobs.KindPurge {
			actors = append(actors, e.Actor)
		}
	}
	if strings.Join(actors, ",") != purgeActor+",local" {
		t.Errorf("purge entries by %v, want retention's then local's", actors)
	}
	b := filepath.Join(t.TempDir(), "bundle")
	if out, code := runCmd(t, "export", "--data", p.data, "--out", b); code != 0 {
		t.Fatal(out)
	}
	out, code = runCmd(t, "verify-bundle", b)
	if code != 0 || !strings.Contains(out, "the entries name 5 (not in the bundle); 3 of them were purged, as purge entries in the bundle record; 2 were not purged") {
		t.Fatalf("verify-bundle: %d %s", code, out)
	}
	// Each purged payload is named, with the purge entry that purged it:
	// who, when and why.
	for blob, by := range map[string]string{
		p.aliceArgs: `by "` + purgeActor + `": "retention: max_age 48h0m0s"`,
		p.aliceRes:  `by "` + purgeActor + `": "retention: max_age 48h0m0s"`,
		p.bobArgs:   `by "local": "erasure request #2"`,
	} {
		if !regexp.MustCompile(`purged: entry \d+ \(call(\.result)?\) names blob ` + blob + `: purged by purge entry \d+ at \S+, ` + regexp.QuoteMeta(by)).MatchString(out) {
			t.Errorf("verify-bundle does not say blob %s was purged %s:\n%s", blob, by, out)
		}
	}
	var stdout, stderr bytes.Buffer
	code = run(context.Background(), []string{"verify-bundle", "--json", b}, &stdout, &stderr)
	out = stdout.String()
	var v struct {
		OK     bool `json:"ok"`
		Report struct {
			Entries  uint64        `json:"Entries"`
			Payloads payloadReport `json:"payloads"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || !v.OK || v.Report.Entries == 0 ||
		len(v.Report.Payloads.PurgedBy) != 3 || v.Report.Payloads.Named != 5 {
		t.Errorf("verify-bundle --json: %d %v %s", code, err, out)
	}
}

// TestPlanPurgeByTask: a task's purge takes the payloads of the calls its
// claims cite, and of their results.
func TestPlanPurgeByTask(t *testing.T) {
	ctx := context.Background()
	bs, _ := blobs.Open(t.TempDir())
	a, _ := bs.Put([]byte("a"))
	r, _ := bs.Put([]byte("r"))
	other, _ := bs.Put([]byte("o"))
	now := time.Now()
	entries := []*log.Entry{
		{Kind: log.KindCall, Time: now, Actor: "x", Fields: map[string]any{"args_sha256": a}},
		{Kind: log.KindCallResult, Time: now, Actor: "x", Fields: map[string]any{"call": 0, "result_sha256": r, "result_retained": true}},
		{Kind: log.KindCall, Time: now, Actor: "x", Fields: map[string]any{"args_sha256": other}},
		{Kind: "task.claim", Time: now, Actor: "x", Fields: map[string]any{"task_id": "t_1", "evidence": []uint64{0}}},
	}
	var raw [][]byte
	for _, e := range entries {
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	src := entryList(raw)
	got, _, err := planPurge(ctx, src, uint64(len(raw)), blobs.PurgeCriteria{Task: "t_1"}, bs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a, r}
	if a > r {
		want = []string{r, a}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("task purge plans %v, want %v", got, want)
	}
}

type entryList [][]byte

func (l entryList) Entries(_ context.Context, start, end uint64) ([][]byte, error) {
	return l[start:end], nil
}

// TestNumbersAndNamesRefused: a number a flag cannot mean, or a purge of
// something the log never names, is refused with what was wrong, and
// nothing is written. Before, --size 0 proved against the latest
// checkpoint, --to 0 exported the whole log, --index -5 asked for one of
// --index and --leaf-hash, --threshold -3 meant all, --older-than -1h
// asked what to purge, and a purge of an unknown task, actor or blob
// "purged 0 blobs" with exit 0.
func TestNumbersAndNamesRefused(t *testing.T) {
	p := makePayloadLog(t)
	d := p.data
	rc, _ := runCmd(t, "prove", "--data", d, "--index", "1")
	rf := filepath.Join(t.TempDir(), "r")
	os.WriteFile(rf, []byte(rc), 0o600)
	vkey := filepath.Join(d, logVKeyFile)
	size := func() uint64 {
		s, _ := openStore(d, true)
		defer s.Close()
		st, _ := s.State(context.Background())
		return st.Size
	}
	before := size()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--data", d, "--index", "1", "--size", "0"}, "--size 0 is the empty tree"},
		{[]string{"prove", "--data", d, "--index", "-5"}, "--index -5: an index is 0 or more"},
		{[]string{"evidence", "--data", d, "--index", "-5", "--out", filepath.Join(t.TempDir(), "ev")}, "--index -5: an index is 0 or more"},
		{[]string{"export", "--data", d, "--to", "0", "--out", filepath.Join(t.TempDir(), "b")}, "--to 0 does not end after --from 0"},
		{[]string{"export", "--data", d, "--from", "3", "--to", "2", "--out", filepath.Join(t.TempDir(), "b")}, "--to 2 does not end after --from 3"},
		{[]string{"verify-proof", "--vkey", vkey, "--threshold", "-3", rf}, "--threshold -3: give at least 1"},
		{[]string{"purge", "--data", d, "--older-than", "-1h", "--reason", "r"}, "--older-than must be a positive duration"},
		{[]string{"purge", "--data", d, "--older-than", "0s", "--reason", "r"}, "--older-than must be a positive duration"},
		{[]string{"purge", "--data", d, "--task", "t_00000000000000000000000000000000", "--reason", "r"}, `no entry of the log names task "t_00000000000000000000000000000000"`},
		{[]string{"purge", "--data", d, "--actor", "nobody", "--reason", "r"}, `no entry of the log is by actor "nobody"`},
		{[]string{"purge", "--data", d, "--blob", strings.Repeat("ab", 32), "--reason", "r"}, "no entry of the log names blob " + strings.Repeat("ab", 32)},
	} {
		out, code := runCmd(t, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: %d %s; want it to say %q", c.args, code, out, c.want)
		}
	}
	if size() != before {
		t.Error("a refused command wrote to the log")
	}
	// What the flags can mean still works.
	if out, code := runCmd(t, "prove", "--data", d, "--index", "1", "--size", strconv.FormatUint(before, 10)); code != 0 {
		t.Errorf("prove --size %d: %s", before, out)
	}
	if out, code := runCmd(t, "purge", "--data", d, "--actor", "alice", "--reason", "r", "--dry-run"); code != 0 || !strings.Contains(out, "would purge 2 blobs") {
		t.Errorf("purge --actor alice: %s", out)
	}
}

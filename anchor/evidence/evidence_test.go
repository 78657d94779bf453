package evidence_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// testLog is an in-memory log with one witness, anchored by an
// in-process TSA and a fake Rekor; the runner anchors the cosigned
// checkpoint, as the sidecar does with witnesses configured.
type testLog struct {
	t         testing.TB
	store     *logtest.Memory
	seq       *server.Sequencer
	signer    note.Signer
	vkey      string
	anchorKey []byte
	witness   *log.CosignatureSigner
	runner    *online.Runner
	records   *anchor.Store
	trust     *anchor.Trust
	// key, rekor and resolved are the anchoring key, the fake Rekor and
	// the anchors config the runner uses.
	key      *ecdsa.PrivateKey
	rekor    *fakerekor.Rekor
	resolved *online.Resolved
}

// cosigningLog is the sequencer as the runner sees it, with the latest
// checkpoint cosigned by the witness.
type cosigningLog struct {
	*server.Sequencer
	signers []note.Signer
}

func (c cosigningLog) Checkpoint() (uint64, []byte) {
	size, n := c.Sequencer.Checkpoint()
	cp, err := log.ParseCheckpointNote(n)
	if err != nil {
		return size, n
	}
	msg, err := note.Sign(&note.Note{Text: cp.String()}, c.signers...)
	if err != nil {
		return size, n
	}
	return size, msg
}

func newTestLog(t testing.TB) *testLog {
	t.Helper()
	ctx := context.Background()
	skey, vkey, _ := note.GenerateKey(rand.Reader, "provlog.test/evidence")
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	l := &testLog{t: t, store: logtest.NewMemory(), signer: signer, vkey: vkey, anchorKey: pub}
	var err error
	l.seq, err = server.OpenSequencer(ctx, l.store, signer, verifier, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), signer.Name(), vkey, pub, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.seq.Close() })
	wkey, _, err := log.GenerateCosignerKey(rand.Reader, "witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	if l.witness, err = log.ParseCosignerKey(wkey); err != nil {
		t.Fatal(err)
	}
	tsa := testtsa.New(t, "Test TSA")
	rk := fakerekor.New(t)
	cfg := &online.Config{Interval: time.Hour, Timeout: 5 * time.Second,
		TSA:   []online.TSAConfig{{URL: tsa.URL, Roots: []string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}))}}},
		Rekor: &online.RekorConfig{URL: rk.URL, PublicKey: string(rk.PublicKeyPEM())}}
	res, err := cfg.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	l.trust = res.Trust
	l.key, l.rekor, l.resolved = key, rk, res
	if l.records, err = anchor.OpenStore(filepath.Join(t.TempDir(), "anchors")); err != nil {
		t.Fatal(err)
	}
	l.runner, err = online.NewRunner(ctx, online.Options{Config: res, Log: cosigningLog{l.seq, []note.Signer{signer, l.witness}},
		Tree: l.store, Records: l.records, Signer: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *testLog) append(kind, actor string, fields map[string]any) uint64 {
	l.t.Helper()
	b, err := (&log.Entry{Kind: kind, Time: time.Now(), Actor: actor, Fields: fields}).Marshal()
	if err != nil {
		l.t.Fatal(err)
	}
	r, err := l.seq.Append(context.Background(), b)
	if err != nil {
		l.t.Fatal(err)
	}
	return r.Index
}

func (l *testLog) options(index uint64, context ...uint64) evidence.Options {
	l.t.Helper()
	recs, err := l.records.List()
	if err != nil {
		l.t.Fatal(err)
	}
	_, latest := l.seq.Checkpoint()
	return evidence.Options{Source: l.store, Index: index, Latest: latest, VKey: l.vkey, Signer: l.signer, AnchorKey: l.anchorKey,
		Records: recs, Witnesses: []string{l.witness.Verifier().String()}, Threshold: 1, Trust: l.trust, Context: context}
}

func TestWriteVerify(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file", "args": map[string]any{"path": "/x"}})
	create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "write x"})
	accept := l.append("task.accept", "alice", map[string]any{"task_id": "t_1"})
	// Reviewed: the call, made before the accept and with no call.result,
	// is no observed claim's to cite under the rules.
	claim := l.append("task.claim", "alice", map[string]any{"task_id": "t_1", "provenance": "reviewed", "summary": "done", "evidence": []uint64{call}})
	if _, err := l.runner.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	late := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "read_file"})

	dir := filepath.Join(t.TempDir(), "call")
	if _, err := evidence.Write(ctx, dir, l.options(call)); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, dir, l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.String()
	for _, want := range []string{`entry 1, a call of "fs__write_file" by "alice"`, "at size 5", `according to TSA "Test TSA"`, "according to Rekor", "cosigned by 1 of 1 witnesses (witness.test/w1)", "issued at size 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if !rep.Manifest.Anchored || !rep.Manifest.Cosigned || len(rep.Manifest.Missing) != 0 {
		t.Errorf("manifest %+v", rep.Manifest)
	}

	cdir := filepath.Join(t.TempDir(), "claim")
	if _, err := evidence.Write(ctx, cdir, l.options(claim, create, accept, call)); err != nil {
		t.Fatal(err)
	}
	rep, err = evidence.Verify(ctx, cdir, l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	s = rep.String()
	for _, want := range []string{`a completion claim ("reviewed") on task "t_1", citing entries 1`, "task.create entry 2", "task.accept entry 3", `cited entry 1: a call of "fs__write_file"`} {
		if !strings.Contains(s, want) {
			t.Errorf("claim report lacks %q:\n%s", want, s)
		}
	}

	// An entry after the last anchor: the latest checkpoint, and the
	// manifest says what is missing.
	ldir := filepath.Join(t.TempDir(), "late")
	if _, err := evidence.Write(ctx, ldir, l.options(late)); err != nil {
		t.Fatal(err)
	}
	rep, err = evidence.Verify(ctx, ldir, l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Manifest.Anchored || rep.Manifest.Cosigned || len(rep.Manifest.Missing) != 2 {
		t.Errorf("late manifest %+v", rep.Manifest)
	}
	if !strings.Contains(rep.String(), "missing: no anchor covers the entry") {
		t.Errorf("late report:\n%s", rep.String())
	}

	// A wrong key fails, naming the files it cannot vouch for.
	_, other, _ := note.GenerateKey(rand.Reader, "provlog.test/evidence")
	if _, err := evidence.Verify(ctx, dir, other); err == nil || !strings.Contains(err.Error(), evidence.CheckpointFile) {
		t.Errorf("another key: %v", err)
	}
}

// TestEveryFileEveryByte flips one bit at ten places spread over every
// file of an evidence, first and last byte included: each time Verify
// fails and names that file.
func TestEveryFileEveryByte(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
	create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "write x"})
	claim := l.append("task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "reported", "source": "x", "summary": "ok", "evidence": []uint64{call}})
	if _, err := l.runner.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ev")
	m, err := evidence.Write(ctx, dir, l.options(claim, create, call))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) < 17 {
		t.Fatalf("only %d files: %v", len(m.Files)+1, m.Files)
	}
	flipEveryFile(t, dir, l.vkey, m)
	if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
		t.Fatalf("restored: %v", err)
	}
	// An extra file, or a missing one, fails too.
	os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("x"), 0o644)
	if _, err := evidence.Verify(ctx, dir, l.vkey); err == nil || !strings.Contains(err.Error(), "extra.txt") {
		t.Errorf("extra file: %v", err)
	}
	os.Remove(filepath.Join(dir, "extra.txt"))
	os.Remove(filepath.Join(dir, evidence.IssuedFile))
	if _, err := evidence.Verify(ctx, dir, l.vkey); err == nil || !strings.Contains(err.Error(), evidence.IssuedFile) {
		t.Errorf("missing file: %v", err)
	}
	// The genesis entry missing is called missing, not another entry.
	os.Remove(filepath.Join(dir, "context", "0.json"))
	if _, err := evidence.Verify(ctx, dir, l.vkey); err == nil || !strings.Contains(err.Error(), "context/0.json: is missing") {
		t.Errorf("missing genesis entry: %v", err)
	}
}

// flipEveryFile flips one bit at ten places spread over every file of
// the evidence in dir, whose manifest is m, first and last byte
// included: each time Verify must fail and name that file.
func flipEveryFile(t *testing.T, dir, vkey string, m *evidence.Manifest) {
	t.Helper()
	ctx := context.Background()
	names := []string{evidence.ManifestFile}
	for n := range m.Files {
		names = append(names, n)
	}
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 10 {
			at := k * (len(orig) - 1) / 9
			b := append([]byte(nil), orig...)
			b[at] ^= 0x01
			os.WriteFile(p, b, 0o644)
			_, err := evidence.Verify(ctx, dir, vkey)
			var ve *evidence.VerifyError
			if !errors.As(err, &ve) {
				t.Errorf("%s byte %d changed: %v", name, at, err)
				continue
			}
			named := false
			for _, pr := range ve.Problems {
				named = named || pr.Part == name
			}
			if !named {
				t.Errorf("%s byte %d changed: problems do not name it: %v", name, at, err)
			}
		}
		os.WriteFile(p, orig, 0o644)
	}
}

func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	l := newTestLog(b)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
	for range 1000 {
		l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "read_file"})
	}
	if _, err := l.runner.AnchorNow(ctx); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "ev")
	if _, err := evidence.Write(ctx, dir, l.options(call)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := evidence.Verify(ctx, dir, l.vkey); err != nil {
			b.Fatal(err)
		}
	}
}

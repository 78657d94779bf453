package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/witness/witnesstest"
	"golang.org/x/mod/sumdb/note"
)

// makeDataDir makes a stopped sidecar's data dir holding n call entries
// after the genesis entry.
func makeDataDir(t testing.TB, n int) string {
	t.Helper()
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.test/export")
	store, err := logpebble.Open(filepath.Join(data, dbDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), k.signer.Name(), k.vkey, k.anchorPub, version) },
	})
	if err != nil {
		t.Fatal(err)
	}
	// Append from many goroutines so the sequencer batches.
	const workers = 64
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := w; i < n; i += workers {
				b, err := (&log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "bench", Fields: map[string]any{
					"server": "ensembl", "tool": "lookup", "args": map[string]any{"id": "ENSG" + strconv.Itoa(i)},
					"is_error": false, "started": time.Now().UTC().Format(log.TimeFormat), "duration_ns": 1000,
					"result_sha256": hex.EncodeToString(make([]byte, 32)), "result_bytes": 10, "release": "112",
				}}).Marshal()
				if err == nil {
					_, err = seq.Append(ctx, b)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seq.Close()
	store.Close()
	return data
}

func TestExportCommand(t *testing.T) {
	data := makeDataDir(t, 50)
	out := filepath.Join(t.TempDir(), "bundle")
	var stdout, stderr bytes.Buffer
	if err := runExport(context.Background(), []string{"--data", data, "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr.String())
	}
	stdout.Reset()
	if err := runVerifyBundle(context.Background(), []string{out}, &stdout, &stderr); err != nil {
		t.Fatalf("verify-bundle: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "OK: 51 entries") || !strings.Contains(stdout.String(), "matches the entries under PROV mapping 5 (a name's last \".\" in an id escaped)\n") {
		t.Errorf("verify-bundle said %q", stdout.String())
	}
	// It names the key the bundle brought, which the auditor must
	// compare, and claims no anchors it did not check.
	vkey, _ := os.ReadFile(filepath.Join(data, "log.vkey"))
	for _, want := range []string{"signed with the bundle's log.vkey (" + strings.TrimSpace(string(vkey)) + ": compare it", "no witness cosignatures; no anchor records;"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("verify-bundle said %q; want %q", stdout.String(), want)
		}
	}
	// A bundle of the first mapping (made by an older provlog, whose
	// manifest names no mapping) is said to match under that one. Its
	// task entries, which a test fixture wrote with ids such as "t_1",
	// break the rules, and verify-bundle says so after.
	stdout.Reset()
	stderr.Reset()
	if err := runVerifyBundle(context.Background(), []string{filepath.Join("..", "..", "log", "bundle", "testdata", "mapping1")}, &stdout, &stderr); err == nil ||
		!strings.Contains(stdout.String(), "matches the entries under PROV mapping 1 (entries' auth members left out)\n") ||
		!strings.Contains(stderr.String(), `FAILED entry 1 (task.create): breaks rule unknown_task: "t_1" is not a task id`) {
		t.Errorf("verify-bundle of a first-mapping bundle: %v, said %q\n%s", err, stdout.String(), stderr.String())
	}
	// A changed entry is caught and named.
	p := filepath.Join(out, "provenance.jsonl")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte("ENSG7\""), []byte("ENSG8\""), 1), 0o644)
	stderr.Reset()
	if err := runVerifyBundle(context.Background(), []string{out}, &stdout, &stderr); err == nil || !strings.Contains(stderr.String(), "FAILED provenance.jsonl") {
		t.Errorf("tampered bundle: err %v, stderr %s", err, stderr.String())
	}
	// A range.
	out2 := filepath.Join(t.TempDir(), "range")
	if err := runExport(context.Background(), []string{"--data", data, "--out", out2, "--from", "10", "--to", "20"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := runVerifyBundle(context.Background(), []string{out2}, &stdout, &stderr); err != nil || !strings.HasPrefix(stdout.String(), "OK: 10 entries [10, 20)") {
		t.Fatalf("range: %v %s %s", err, stdout.String(), stderr.String())
	}
}

// TestExportScale measures export and verify-bundle on a large log:
// PROVLOG_EXPORT_N=1000000 go test -run TestExportScale -v ./cmd/provlog
func TestExportScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PROVLOG_EXPORT_N"))
	if n == 0 {
		t.Skip("set PROVLOG_EXPORT_N to measure")
	}
	t0 := time.Now()
	data := makeDataDir(t, n)
	t.Logf("built %d entries in %s", n, time.Since(t0))
	out := filepath.Join(t.TempDir(), "bundle")
	var stdout, stderr bytes.Buffer
	measure := func(name string, f func() error) {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		peak := uint64(0)
		stop := make(chan bool)
		go func() {
			for {
				select {
				case <-stop:
					stop <- true
					return
				case <-time.After(20 * time.Millisecond):
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
		}()
		t0 := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stderr.String())
		}
		d := time.Since(t0)
		stop <- true
		<-stop
		t.Logf("%s: %s, peak heap in use %.1f MiB (sampled every 20ms)", name, d, float64(peak)/(1<<20))
	}
	measure("export", func() error {
		return runExport(context.Background(), []string{"--data", data, "--out", out}, &stdout, &stderr)
	})
	measure("verify-bundle", func() error { return runVerifyBundle(context.Background(), []string{out}, &stdout, &stderr) })
	for _, f := range []string{"provenance.jsonl", "provenance.json"} {
		st, _ := os.Stat(filepath.Join(out, f))
		t.Logf("%s: %.1f MiB", f, float64(st.Size())/(1<<20))
	}
	t.Log(stdout.String())
}

// TestExportAnchorTied: a bundle of [5, 10) of a log anchored at a size
// past its entries ties the record to the entries' tree by consistency
// proof, and verify-bundle says so; the same bundle without
// consistency.json (as exported before it) verifies, saying the record is
// not tied.
func TestExportAnchorTied(t *testing.T) {
	data := makeDataDir(t, 20)
	dir := t.TempDir()
	tsa, rk := testtsa.New(t, "TSA"), fakerekor.New(t)
	os.WriteFile(filepath.Join(dir, "tsa.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}), 0o600)
	os.WriteFile(filepath.Join(dir, "rekor.pub"), rk.PublicKeyPEM(), 0o600)
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, fmt.Appendf(nil, "data: %s\nanchors:\n  interval: 1h\n  timeout: 5s\n  tsa:\n    - url: %s\n      roots: [tsa.pem]\n  rekor:\n    url: %s\n    public_key: rekor.pub\n",
		data, tsa.URL, rk.URL), 0o600)
	if out, code := runCmd(t, "anchor", "--config", cfg); code != 0 {
		t.Fatalf("anchor: %d %s", code, out)
	}
	out := filepath.Join(dir, "bundle")
	if msg, code := runCmd(t, "export", "--data", data, "--out", out, "--from", "5", "--to", "10"); code != 0 {
		t.Fatalf("export: %d %s", code, msg)
	}
	msg, code := runCmd(t, "verify-bundle", out)
	if want := "1 anchor records verified against the roots and keys the records carry, 1 of them anchoring a root of these entries' tree (1 by a consistency proof to the checkpoint, consistency.json);"; code != 0 || !strings.Contains(msg, want) {
		t.Errorf("verify-bundle: %d %q; want %q", code, msg, want)
	}
	os.Remove(filepath.Join(out, bundle.ConsistencyFile))
	var m bundle.Manifest
	mb, _ := os.ReadFile(filepath.Join(out, bundle.ManifestFile))
	json.Unmarshal(mb, &m)
	delete(m.Files, bundle.ConsistencyFile)
	mb, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(out, bundle.ManifestFile), mb, 0o644)
	msg, code = runCmd(t, "verify-bundle", out)
	if want := "0 of them anchoring a root of these entries' tree (1 at sizes this bundle has neither hashes nor a consistency proof for: not tied to these entries);"; code != 0 || !strings.Contains(msg, want) {
		t.Errorf("verify-bundle of the older layout: %d %q; want %q", code, msg, want)
	}
}

// TestExportWitnessPolicy: a bundle exported under a 2-of-3 witness
// policy, with the newest cosigned checkpoint cosigned by 2, verifies and
// says who cosigned under which policy; cosigned by 1, it is refused,
// naming the policy and who cosigned.
func TestExportWitnessPolicy(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 10)
	store, err := logpebble.Open(filepath.Join(data, dbDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.State(ctx)
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(st.Checkpoint, note.VerifierList(k.verifier))
	if err != nil {
		t.Fatal(err)
	}
	var ws []*log.CosignatureSigner
	cfg := filepath.Join(t.TempDir(), "provlog.yaml")
	text := "data: " + data + "\nwitness_policy:\n  threshold: 2\nwitnesses:\n"
	for i := range 3 {
		w := witnesstest.NewCosigner(t, fmt.Sprintf("witness.test/w%d", i+1))
		ws = append(ws, w)
		text += fmt.Sprintf("  - {url: http://w%d.test, vkey: %s}\n", i+1, w.Verifier())
	}
	os.WriteFile(cfg, []byte(text), 0o600)
	cosigned := func(by ...*log.CosignatureSigner) []byte {
		signers := []note.Signer{k.signer}
		for _, w := range by {
			signers = append(signers, w)
		}
		b, err := note.Sign(&note.Note{Text: n.Text}, signers...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	export := func(cp []byte) (string, string, int) {
		os.WriteFile(filepath.Join(data, cosignedFile), cp, 0o644)
		out := filepath.Join(t.TempDir(), "bundle")
		msg, code := runCmd(t, "export", "--data", data, "--config", cfg, "--out", out)
		return out, msg, code
	}

	out, msg, code := export(cosigned(ws[2], ws[0]))
	if code != 0 {
		t.Fatalf("export: %d %s", code, msg)
	}
	msg, code = runCmd(t, "verify-bundle", out)
	if want := "; cosigned by 2 of 3 witnesses (policy: 2 of 3): witness.test/w1, witness.test/w3 under the bundle's own witnesses.txt (not pinned: compare its keys with the witnesses' from a source you trust, or give --witness); no anchor records;"; code != 0 || !strings.Contains(msg, want) {
		t.Errorf("verify-bundle: %d %q; want %q", code, msg, want)
	}

	one := cosigned(ws[1])
	if _, msg, code := export(one); code == 0 || !strings.Contains(msg, "is cosigned by 1 of 3 witnesses (policy: 2 of 3): witness.test/w2: it does not meet the witness policy") {
		t.Errorf("export of a checkpoint cosigned by 1: %d %q", code, msg)
	}
	// The bundle's checkpoint swapped for that one (the manifest's hash
	// fixed) is refused too.
	os.WriteFile(filepath.Join(out, bundle.CheckpointFile), one, 0o644)
	var m bundle.Manifest
	mb, _ := os.ReadFile(filepath.Join(out, bundle.ManifestFile))
	json.Unmarshal(mb, &m)
	sum := sha256.Sum256(one)
	m.Files[bundle.CheckpointFile] = hex.EncodeToString(sum[:])
	mb, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(out, bundle.ManifestFile), mb, 0o644)
	msg, code = runCmd(t, "verify-bundle", out)
	if want := "checkpoint: is cosigned by 1 of 3 witnesses (policy: 2 of 3): witness.test/w2, fewer than the policy of witnesses.txt requires"; code == 0 || !strings.Contains(msg, want) {
		t.Errorf("verify-bundle of a checkpoint cosigned by 1: %d %q; want %q", code, msg, want)
	}

	// A bundle exported before witnesses.txt stated a threshold still
	// verifies, all its witnesses required, and says so.
	// (Its task entries break the rules: see TestExportCommand.)
	msg, code = runCmd(t, "verify-bundle", filepath.Join("..", "..", "log", "bundle", "testdata", "mapping1"))
	if want := "cosigned by 1 of 1 witnesses (policy: 1 of 1): witness.test/w1 (the bundle's witnesses.txt names no threshold: all are required) under the bundle's own witnesses.txt (not pinned: compare its keys with the witnesses' from a source you trust, or give --witness);"; code != 1 || !strings.Contains(msg, want) {
		t.Errorf("verify-bundle of an old bundle: %d %q; want %q", code, msg, want)
	}
}

package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/witness"
	wserver "github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesstest"
)

func TestDecodeWitnessConfig(t *testing.T) {
	parse := func(src string) ([]WitnessConfig, WitnessPolicyConfig, error) {
		path := filepath.Join(t.TempDir(), "provlog.yaml")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := loadConfig(path)
		if err != nil {
			return nil, WitnessPolicyConfig{}, err
		}
		return c.Witnesses, c.WitnessPolicy, nil
	}
	k1 := witnesstest.NewCosigner(t, "witness.example/w1").Verifier().String()
	k2 := witnesstest.NewCosigner(t, "witness.example/w2").Verifier().String()
	ws, p, err := parse("witnesses:\n  - {url: http://a, vkey: " + k1 + "}\n  - {url: http://b, vkey: " + k2 + "}\nwitness_policy: {threshold: 1, interval: 1s, timeout: 5s}\n")
	if err != nil || len(ws) != 2 || ws[1].URL != "http://b" || p.Threshold != 1 || p.Interval != time.Second || p.Timeout != 5*time.Second {
		t.Fatalf("%+v %+v %v", ws, p, err)
	}
	if _, p, err := parse("witnesses:\n  - {url: http://a, vkey: " + k1 + "}\n  - {url: http://b, vkey: " + k2 + "}\n"); err != nil || p.Threshold != 2 {
		t.Errorf("default threshold: %+v %v", p, err)
	}
	for _, bad := range []string{
		"witnesses:\n  - {url: http://a}\n",
		"witnesses:\n  - {url: http://a, vkey: k, extra: 1}\n",
		"witnesses:\n  - {url: http://a, vkey: k}\nwitness_policy: {threshold: 2}\n",
		"witness_policy: {threshold: 1}\n",
		"witnesses:\n  - {url: http://a, vkey: k}\nwitness_policy: {thresh: 1}\n",
		"witnesses:\n  - {url: http://a, vkey: k}\nwitness_policy: {timeout: 60}\n",
	} {
		if _, _, err := parse(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestWitnessing runs the sidecar's witnessing against two provlog
// witnesses over HTTP: /log/checkpoint serves the cosigned checkpoint,
// receipts carry the cosignatures and verify under --witness/--threshold,
// and a witness that saw another history gets a witness.conflict entry.
func TestWitnessing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, "provlog.example/sidecar")
	l := witnesstest.NewLog(t, k, "sidecar")
	evil := witnesstest.NewLog(t, k, "evil")

	var cfgs []WitnessConfig
	var signers []*log.CosignatureSigner
	for i, name := range []string{"witness.example/w1", "witness.example/w2", "witness.example/w3"} {
		s := witnesstest.NewCosigner(t, name)
		signers = append(signers, s)
		w := logWitness(t, s, k.Verifier)
		if i == 2 {
			// w3 cosigned the evil twin at a size the sidecar's log will
			// not reach during the test.
			r := &witness.AddCheckpointRequest{OldSize: 0, Checkpoint: evil.Grow(t, 1000)}
			if _, err := w.AddCheckpoint(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		srv := httptest.NewServer(w)
		t.Cleanup(srv.Close)
		cfgs = append(cfgs, WitnessConfig{URL: srv.URL, VKey: s.Verifier().String()})
	}
	data := t.TempDir()
	record := func(ctx context.Context, e []byte) error {
		_, err := l.Seq.Append(ctx, e)
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := openWitnessing(data, cfgs, WitnessPolicyConfig{Threshold: 2, Interval: 20 * time.Millisecond}, k.Verifier, l.Store, record, logger)
	if err != nil {
		t.Fatal(err)
	}
	go w.run(ctx, l.Seq)

	l.Grow(t, 50)
	proctest.WaitFor(t, "a checkpoint of size 50 or more cosigned", func() bool {
		c, err := log.ParseCheckpointNote(w.cos.Latest())
		return err == nil && c.Size >= 50
	})
	// The conflict with w3 is in the log.
	proctest.WaitFor(t, "w3's witness.conflict entry", func() bool {
		size, _ := l.Seq.Checkpoint()
		es, _ := l.Store.Entries(ctx, 0, size)
		for _, e := range es {
			pe, err := log.ParseEntry(e)
			if err != nil || pe.Kind != log.KindWitnessConflict {
				continue
			}
			if c, err := witness.ParseConflict(pe); err == nil && c.Witness == "witness.example/w3" {
				return true
			}
		}
		return false
	})

	// /log/checkpoint serves the cosigned checkpoint, and so do receipts
	// from /log/proof/inclusion without a size.
	srv := httptest.NewServer(server.NewAPI(server.APIOptions{Store: l.Store, Seq: l.Seq, Cosigned: w.cos.Latest}))
	defer srv.Close()
	for _, p := range []string{"/log/checkpoint", "/log/proof/inclusion?index=7"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Count(string(body), "— witness.example/") < 2 {
			t.Errorf("%s without cosignatures:\n%s", p, body)
		}
	}

	// A receipt carries them and verifies as verify-proof would check it.
	r, err := server.ProveLatest(ctx, l.Store, server.InclusionRequest{Index: 7, Cosigned: w.cos.Latest()})
	if err != nil {
		t.Fatal(err)
	}
	var flags witnessFlags
	vkeyFile := filepath.Join(t.TempDir(), "w2.vkey")
	os.WriteFile(vkeyFile, []byte(signers[1].Verifier().String()+"\n"), 0o644)
	for _, arg := range []string{signers[0].Verifier().String(), vkeyFile} {
		if err := flags.Set(arg); err != nil {
			t.Fatal(err)
		}
	}
	if err := flags.Set("nonsense"); err == nil {
		t.Error("witnessFlags accepted nonsense")
	}
	pr, err := log.ParseReceipt([]byte(r.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifyWitnessedReceipt(pr, pr.Extra, k.Verifier, log.WitnessPolicy{Witnesses: flags, Threshold: len(flags)}); err != nil {
		t.Fatalf("verify-proof --witness w1 --witness w2: %v", err)
	}
	var w3only witnessFlags
	w3only.Set(signers[2].Verifier().String())
	if _, err := verifyWitnessedReceipt(pr, pr.Extra, k.Verifier, log.WitnessPolicy{Witnesses: w3only, Threshold: 1}); err == nil || !strings.Contains(err.Error(), "not enough of the witnesses you trust") {
		t.Errorf("receipt with only w3 trusted: %v", err)
	}
	if _, err := verifyWitnessedReceipt(pr, pr.Extra, k.Verifier, log.WitnessPolicy{Witnesses: w3only, Threshold: 2}); err == nil {
		t.Error("--threshold above the witnesses given was accepted")
	}

	// provlog prove --data uses the cosigned checkpoint the sidecar kept,
	// and the latest for an entry it does not cover.
	proctest.WaitFor(t, "the cosigned checkpoint kept in the data dir", func() bool {
		b, _ := os.ReadFile(filepath.Join(data, cosignedFile))
		return b != nil && string(b) == string(w.cos.Latest())
	})
	proveWithCosigned := func(index int64) (*log.Receipt, error) {
		cosigned, err := readCosigned(data)
		if err != nil {
			return nil, err
		}
		return server.ProveLatest(ctx, l.Store, server.InclusionRequest{Index: uint64(index), Cosigned: cosigned})
	}
	r2, err := proveWithCosigned(7)
	if err != nil || !strings.Contains(string(r2.Checkpoint), "— witness.example/") {
		t.Fatalf("proveWithCosigned: %v\n%v", err, r2)
	}
	size, _ := l.Seq.Checkpoint()
	cs, _ := log.ParseCheckpointNote(w.cos.Latest())
	l.Grow(t, size+1)
	if cs.Size <= size {
		r3, err := proveWithCosigned(int64(size))
		if err != nil || strings.Contains(string(r3.Checkpoint), "— witness.example/") {
			t.Fatalf("proveWithCosigned for an entry past the cosigned tree: %v\n%v", err, r3)
		}
	}

	// The cosigned checkpoint survives a restart.
	cancel()
	w2, err := openWitnessing(data, cfgs, WitnessPolicyConfig{Threshold: 2}, k.Verifier, l.Store, record, logger)
	if err != nil {
		t.Fatal(err)
	}
	if w2.cos.Latest() == nil {
		t.Error("the cosigned checkpoint was not kept in the data dir")
	}
	if st := w2.status(); st["threshold"] != float64(2) {
		t.Errorf("status %v", st)
	}
}

// TestWitnessHealthOnlyWhenOverdue: from the sidecar's start until its
// first cosignature the log's checkpoint waits on the witnesses, which is
// no fault: while a witness is still within its timeout the policy is not
// reported unmet. Once the checkpoint has waited longer than the
// interval and the timeout, a cosignature is overdue and it is; and once
// cosigned, nothing is reported however much later.
func TestWitnessHealthOnlyWhenOverdue(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, "provlog.example/sidecar")
	l := witnesstest.NewLog(t, k, "sidecar")
	s := witnesstest.NewCosigner(t, "witness.example/w1")
	ws := logWitness(t, s, k.Verifier)
	hold := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
		ws.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	defer release()
	record := func(ctx context.Context, e []byte) error {
		_, err := l.Seq.Append(ctx, e)
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfgs := []WitnessConfig{{URL: srv.URL, VKey: s.Verifier().String()}}
	w, err := openWitnessing(t.TempDir(), cfgs, WitnessPolicyConfig{Threshold: 1, Interval: 20 * time.Millisecond, Timeout: time.Hour}, k.Verifier, l.Store, record, logger)
	if err != nil {
		t.Fatal(err)
	}
	go w.run(ctx, l.Seq)
	l.Grow(t, 5)
	proctest.WaitFor(t, "the witness asked", func() bool { return requests.Load() > 0 })
	size, _ := l.Seq.Checkpoint()
	if d := w.policyProblem(size, time.Now()); d != "" {
		t.Errorf("the first checkpoint is on its way to the witness (timeout 1h), yet health says: %s", d)
	}
	if d := w.policyProblem(size, time.Now().Add(2*time.Hour)); !strings.Contains(d, "overdue") {
		t.Errorf("2h later, past the interval and the 1h timeout, health says %q, want a cosignature overdue", d)
	}
	release()
	proctest.WaitFor(t, "the checkpoint cosigned", func() bool {
		c, err := log.ParseCheckpointNote(w.cos.Latest())
		return err == nil && c.Size == size
	})
	if d := w.policyProblem(size, time.Now().Add(2*time.Hour)); d != "" {
		t.Errorf("the log's checkpoint is cosigned, yet health says: %s", d)
	}
}

// logWitness is a C2SP tlog-witness cosigning with s for the log whose
// key v is (named as the log's origin), on an in-memory store.
func logWitness(t *testing.T, s *log.CosignatureSigner, v note.Verifier) *wserver.Witness {
	t.Helper()
	w, err := wserver.New(wserver.Options{Signer: s, Logs: []wserver.Log{{Origin: v.Name(), Verifiers: []note.Verifier{v}}}, Store: witnesstest.NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

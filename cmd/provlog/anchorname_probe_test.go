package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestProbeSharedLogAnchorNameCollision: two sidecars on one PostgreSQL
// log anchor at the same moment (their intervals are independent; here
// the TSA answers both at once), so both anchor the same checkpoint of
// size N. Each stores its record as <data>/anchors/000…N.json (records
// are named by size alone) with different bytes (other tokens) and
// appends an anchor entry naming "000…N.json" with its own SHA-256.
// Afterwards the runner of the sidecar whose entry came second cannot
// open: online.Runner.findEntry meets the other's entry first, sees its
// own record's name with another hash, and refuses to start ("anchor
// record … changed after it was logged … put the record back"): an honest
// sidecar is told its record was tampered with, and stops anchoring (and
// serving: openAnchorRunner fails the sidecar's start).
//
// Observed: after the simultaneous round, `provlog anchor --data X` fails
// for one of the two with that message; `provlog audit` of it names the
// record as changed.
//
// Cause: anchor/store.go names records "%020d.json" by size;
// anchor/online/runner.go findEntry and anchor/audit.go match anchor
// entries to records by name. Fix: name records uniquely per sidecar (or
// by their SHA-256), and match entries by record hash, not by name.
func TestProbeSharedLogAnchorNameCollision(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	datas := [2]string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	if err := keygen(datas[0], "provlog.test/anchor-names"); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(datas[1], 0o700)
	for _, f := range []string{logKeyFile, logVKeyFile, anchorKeyFile, anchorPubFile} {
		b, err := os.ReadFile(filepath.Join(datas[0], f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(datas[1], f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tsa := testtsa.New(t, "TSA")
	// The TSA answers once two requests are in (two runners' rounds
	// overlapping); later requests pass at once.
	var (
		mu      sync.Mutex
		waiting int
		both    = make(chan struct{})
	)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		waiting++
		if waiting == 2 {
			close(both)
		}
		mu.Unlock()
		<-both
		tsa.ServeHTTP(w, r)
	}))
	defer gate.Close()
	os.WriteFile(filepath.Join(dir, "tsa.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}), 0o600)
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("store: %s\nanchors:\n  interval: 1h\n  timeout: 10s\n  tsa:\n    - url: %s/tsa\n      roots: [tsa.pem]\n", dsn, gate.URL)), 0o600)

	sc := mustOpenSidecar(t, &Config{Data: datas[0], Actor: "local", Store: dsn})
	for i := range 5 {
		if _, err := sc.seq.Append(ctx, callEntry("s", "t", map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
	sc.close()

	var wg sync.WaitGroup
	outs := [2]string{}
	codes := [2]int{}
	for i, d := range datas {
		wg.Go(func() { outs[i], codes[i] = runCmd(t, "anchor", "--config", cfg, "--data", d) })
	}
	wg.Wait()
	for i := range datas {
		if codes[i] != 0 {
			t.Fatalf("simultaneous provlog anchor %d: %d\n%s", i, codes[i], outs[i])
		}
	}
	if !strings.Contains(outs[0], "anchored size") || !strings.Contains(outs[1], "anchored size") {
		t.Fatalf("%s\n%s", outs[0], outs[1])
	}
	// Both anchored one size: one record name in two data dirs.
	for i, d := range datas {
		out, code := runCmd(t, "anchor", "--config", cfg, "--data", d)
		if code != 0 {
			t.Errorf("sidecar %c's anchor runner no longer opens after an honest simultaneous round: exit %d\n%s", 'A'+i, code, out)
		}
	}
	// And the sidecar itself does not start.
	for i, d := range datas {
		c, err := loadConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Data, c.Actor = d, "local"
		sc, err := openSidecar(ctx, c, quietLogger(), true)
		if err != nil {
			t.Errorf("sidecar %c does not start: %v", 'A'+i, err)
			continue
		}
		sc.close()
	}
}

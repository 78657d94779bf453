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

// sharedAnchorLog is a PostgreSQL log served by two sidecars, A and B,
// each with its own data dir holding the same keys, and one config whose
// anchors: section names one TSA (tsaURL, or the TSA itself when empty).
// Five calls are in the log, through A.
func sharedAnchorLog(t *testing.T, origin string, tsaURL func(tsa *testtsa.TSA) string) (datas [2]string, cfg string) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	datas = [2]string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	if err := keygen(datas[0], origin); err != nil {
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
	url := tsa.URL
	if tsaURL != nil {
		url = tsaURL(tsa)
	}
	os.WriteFile(filepath.Join(dir, "tsa.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}), 0o600)
	cfg = filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("store: %s\nanchors:\n  interval: 1h\n  timeout: 10s\n  tsa:\n    - url: %s\n      roots: [tsa.pem]\n", dsn, url)), 0o600)
	// The calls go through A with no anchors: section, so that nothing
	// anchors but the commands the tests run.
	sc := mustOpenSidecar(t, &Config{Data: datas[0], Actor: "local", Store: dsn})
	for i := range 5 {
		if _, err := sc.seq.Append(ctx, callEntry("s", "t", map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
	sc.close()
	return datas, cfg
}

// TestSharedLogAnchorSameSize: two sidecars on one log anchor at the same
// moment (their intervals are independent; here the TSA answers both at
// once), so both anchor the same size. Records were named by size alone,
// so both entries named one file with different hashes, and the sidecar
// whose entry came second no longer opened its runner ("anchor record …
// changed after it was logged"), nor started.
func TestSharedLogAnchorSameSize(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	// The TSA answers once two requests are in (two runners' rounds
	// overlapping); later requests pass at once.
	var (
		mu      sync.Mutex
		waiting int
		both    = make(chan struct{})
	)
	datas, cfg := sharedAnchorLog(t, "provlog.test/anchor-names", func(tsa *testtsa.TSA) string {
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
		t.Cleanup(gate.Close)
		return gate.URL + "/tsa"
	})
	var wg sync.WaitGroup
	outs := [2]string{}
	codes := [2]int{}
	for i, d := range datas {
		wg.Go(func() { outs[i], codes[i] = runCmd(t, "anchor", "--config", cfg, "--data", d) })
	}
	wg.Wait()
	for i := range datas {
		if codes[i] != 0 || !strings.Contains(outs[i], "anchored size") {
			t.Fatalf("simultaneous provlog anchor %d: %d\n%s", i, codes[i], outs[i])
		}
	}
	var names [2][]string
	for i, d := range datas {
		names[i], _ = filepath.Glob(filepath.Join(d, anchorDir, "*.json"))
		if len(names[i]) != 1 {
			t.Fatalf("sidecar %c holds records %v, want one", 'A'+i, names[i])
		}
	}
	if filepath.Base(names[0][0]) == filepath.Base(names[1][0]) {
		t.Errorf("both sidecars named their records of one size %s", filepath.Base(names[0][0]))
	}
	for i, d := range datas {
		out, code := runCmd(t, "anchor", "--config", cfg, "--data", d)
		if code != 0 {
			t.Errorf("sidecar %c's anchor runner no longer opens after an honest simultaneous round: exit %d\n%s", 'A'+i, code, out)
		}
	}
	for i, d := range datas {
		c, err := loadConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Data, c.Actor = d, "local"
		sc, err := openSidecar(context.Background(), c, quietLogger(), true)
		if err != nil {
			t.Errorf("sidecar %c does not start: %v", 'A'+i, err)
			continue
		}
		sc.close()
	}
}

// TestSharedLogAnchorsAudit: two sidecars anchor one shared log, one after
// the other, each keeping its record in its own data dir. The audit of
// each data dir and verify-bundle of a bundle exported through A failed
// on the other's anchor entry ("names record …, which is not stored");
// they must verify what the data dir (or bundle) holds and say how many
// entries are another sidecar's. A record of A's own that is missing
// still fails A's audit.
func TestSharedLogAnchorsAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	datas, cfg := sharedAnchorLog(t, "provlog.test/shared-anchors", nil)
	for _, d := range datas {
		if out, code := runCmd(t, "anchor", "--config", cfg, "--data", d); code != 0 || !strings.Contains(out, "anchored size") {
			t.Fatalf("provlog anchor --data %s: %d\n%s", d, code, out)
		}
	}
	const elsewhere = "1 anchor entries made by other sidecars of this log, records not"
	for i, d := range datas {
		out, code := runCmd(t, "audit", "--config", cfg, "--data", d)
		if code != 0 || !strings.Contains(out, "OK: 1 anchors verified") || !strings.Contains(out, elsewhere) {
			t.Errorf("audit of sidecar %c's data dir on the honest shared log: exit %d\n%s", 'A'+i, code, out)
		}
	}
	bdir := filepath.Join(filepath.Dir(cfg), "bundle")
	if out, code := runCmd(t, "export", "--config", cfg, "--data", datas[0], "--out", bdir); code != 0 {
		t.Fatalf("export: %d\n%s", code, out)
	}
	if out, code := runCmd(t, "verify-bundle", bdir); code != 0 || !strings.Contains(out, "1 anchor records verified") || !strings.Contains(out, elsewhere) {
		t.Errorf("verify-bundle of a bundle exported from the honest shared log: exit %d\n%s", code, out)
	}
	recs, _ := filepath.Glob(filepath.Join(datas[0], anchorDir, "*.json"))
	if len(recs) != 1 {
		t.Fatalf("A holds records %v", recs)
	}
	os.Remove(recs[0])
	if out, code := runCmd(t, "audit", "--config", cfg, "--data", datas[0]); code == 0 || !strings.Contains(out, "which is not stored") {
		t.Errorf("audit of A with its record deleted: exit %d\n%s", code, out)
	}
}

package main

import (
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
)

// TestAuditRetiredTSA: a data dir anchored with TSA 0 and TSA 1; the
// operator then retires TSA 1. Kept in the config with its roots and
// `retired: true`, its old tokens still verify (the audit passes) and
// `provlog anchor` asks only TSA 0. Dropped from the config, the audit
// fails naming TSA 1's URL and saying how to keep its trust. On the base
// there was no way to keep a TSA's trust without asking it for tokens
// (`retired` was an unknown key), and the failure said only that the URL
// "is not a trusted TSA".
func TestAuditRetiredTSA(t *testing.T) {
	data := makeDataDir(t, 4)
	dir := t.TempDir()
	tsa0, tsa1 := testtsa.New(t, "TSA 0"), testtsa.New(t, "TSA 1")
	root0 := writeFile(t, filepath.Join(dir, "root0.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa0.PKI.Root.Raw}))
	root1 := writeFile(t, filepath.Join(dir, "root1.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa1.PKI.Root.Raw}))
	config := func(name, tsas string) string {
		return writeConfig(t, filepath.Join(dir, name), fmt.Sprintf("data: %s\nanchors:\n  interval: 1h\n  timeout: 10s\n  tsa: [%s]\n", data, tsas))
	}
	both := config("both", fmt.Sprintf("{url: %s, roots: [%s]}, {url: %s, roots: [%s]}", tsa0.URL, root0, tsa1.URL, root1))
	if out, code := runCmd(t, "anchor", "--config", both); code != 0 {
		t.Fatalf("provlog anchor: %d\n%s", code, out)
	}
	retired := config("retired", fmt.Sprintf("{url: %s, roots: [%s]}, {url: %s, roots: [%s], retired: true}", tsa0.URL, root0, tsa1.URL, root1))
	if out, code := runCmd(t, "audit", "--data", data, "--config", retired); code != 0 {
		t.Errorf("audit with TSA 1 retired (its roots kept): exit %d, want 0\n%s", code, out)
	}
	if out, code := runCmd(t, "anchor", "--config", retired); code != 0 {
		t.Errorf("provlog anchor with TSA 1 retired: exit %d\n%s", code, out)
	} else {
		store, err := anchor.OpenStore(filepath.Join(data, anchorDir))
		if err != nil {
			t.Fatal(err)
		}
		last, err := store.Last()
		if err != nil {
			t.Fatal(err)
		}
		if n := len(last.Record.Timestamps); n != 1 || last.Record.Timestamps[0].URL != tsa0.URL {
			t.Errorf("the record made with TSA 1 retired holds %d timestamps; want 1, from TSA 0", n)
		}
	}
	onlyRetired := config("only-retired", fmt.Sprintf("{url: %s, roots: [%s], retired: true}", tsa1.URL, root1))
	if out, code := runCmd(t, "anchor", "--config", onlyRetired); code == 0 || !strings.Contains(out, "not retired") {
		t.Errorf("provlog anchor with its only TSA retired: exit %d, want a refusal saying no authority is left\n%s", code, out)
	}
	gone := config("gone", fmt.Sprintf("{url: %s, roots: [%s]}", tsa0.URL, root0))
	out, code := runCmd(t, "audit", "--data", data, "--config", gone)
	if code == 0 || !strings.Contains(out, tsa1.URL) || !strings.Contains(out, "retired: true") {
		t.Errorf("audit with TSA 1 gone from the config: exit %d; want a failure naming %s and how to keep its trust (retired: true)\n%s", code, tsa1.URL, out)
	}
}

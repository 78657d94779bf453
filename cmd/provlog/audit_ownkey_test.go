package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditOwnKeySaid: a forger who holds a data dir can build a log of
// their own under the same origin (their own log.vkey, their entries):
// provlog audit --data, given no --vkey, checks it against the data dir's
// own log.vkey and passes it. Its OK line must then show that key and say
// it came with the data dir, as verify-bundle says of a bundle's, so the
// auditor compares it with the log's; with the genuine key given it fails.
func TestAuditOwnKeySaid(t *testing.T) {
	genuine, forged := makeDataDir(t, 4), makeDataDir(t, 4)
	fkey, err := os.ReadFile(filepath.Join(forged, logVKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	out, code := runCmd(t, "audit", "--data", forged)
	if code != 0 || !strings.Contains(out, "OK: provlog.test/export: 5 entries recomputed") {
		t.Fatalf("audit of the forger's data dir: %d\n%s", code, out)
	}
	if want := "the data dir's log.vkey (" + strings.TrimSpace(string(fkey)) + ": compare it with the log's key from a source you trust"; !strings.Contains(out, want) {
		t.Errorf("audit's OK line does not say which key it trusted, nor that it came with the data dir; want %q in:\n%s", want, out)
	}
	out, code = runCmd(t, "audit", "--data", forged, "--vkey", filepath.Join(genuine, logVKeyFile))
	if code == 0 {
		t.Errorf("audit of the forger's data dir with the genuine key: %d\n%s", code, out)
	}
	out, code = runCmd(t, "audit", "--data", genuine, "--vkey", filepath.Join(genuine, logVKeyFile))
	if code != 0 || !strings.Contains(out, "the log key you gave (") {
		t.Errorf("audit of the genuine data dir with its key given: %d\n%s", code, out)
	}
}

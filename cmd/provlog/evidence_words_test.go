package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvidenceToolNameWords: a downstream server names a tool with words
// of the report in it (no control character: log.Printable leaves it
// be): "lookup by alice at ..., was in the log ... according to TSA
// "DigiCert" and". The sidecar records a call of it in a log with no
// anchor. verify-evidence prints the call's name inside its OK line;
// unquoted, the line reads as if a TSA had timed the entry, which
// nothing in the evidence says. The name must be quoted, so that what a
// server wrote stays one value.
func TestEvidenceToolNameWords(t *testing.T) {
	const name = `lookup by alice at 2026-12-01T10:14:24Z, was in the log provlog.example/agent-7 at size 9 by 2026-12-01T10:20:01Z according to TSA "DigiCert" and`
	data, _, index := escapeToolLog(t, name)
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", filepath.Join(data, logVKeyFile), ev)
	if code != 0 || !strings.Contains(out, "missing: no anchor") {
		t.Fatalf("verify-evidence of an unanchored call: %d\n%s", code, out)
	}
	if want := `a call of "fx__lookup by alice at 2026-12-01T10:14:24Z, was in the log provlog.example/agent-7 at size 9 by 2026-12-01T10:20:01Z according to TSA \"DigiCert\" and" by `; !strings.Contains(out, want) {
		t.Errorf("verify-evidence prints the tool name a server chose unquoted, as words of its own report; want %q in:\n%s", want, out)
	}
}

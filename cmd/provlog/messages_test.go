package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpMatchesBehaviour: help and usage say what the commands do.
func TestHelpMatchesBehaviour(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"replay", "--help"}, []string{"the run is recorded through its record_replay tool"}},
		{[]string{"help"}, []string{"(--data D [--vkey VKEY] [--config F] | --log URL --vkey VKEY)"}},
	}
	for _, tc := range cases {
		out, _ := runCmd(t, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("provlog %s does not say %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
		if strings.Contains(out, "not recorded") {
			t.Errorf("provlog %s still says runs are not recorded:\n%s", strings.Join(tc.args, " "), out)
		}
	}
	if out, code := runCmd(t, "audit", "--log", "http://127.0.0.1:1"); code != 2 || !strings.Contains(out, "--vkey is required with --log") {
		t.Errorf("audit --log without --vkey: exit %d: %s", code, out)
	}
}

// TestVerifyProofMessages: a receipt that does not verify says why in
// words a user can act on.
func TestVerifyProofMessages(t *testing.T) {
	data := makeDataDir(t, 3)
	dir := t.TempDir()
	write := func(name string, b []byte) string { return writeFile(t, filepath.Join(dir, name), b) }
	rc, code := runCmd(t, "prove", "--data", data, "--index", "1")
	if code != 0 {
		t.Fatal(rc)
	}
	receipt := write("r", []byte(rc))
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.Entries(context.Background(), 1, 2)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	exact := write("entry.json", es[0])
	var pretty bytes.Buffer
	json.Indent(&pretty, es[0], "", "  ")
	prettyFile := write("pretty.json", pretty.Bytes())
	vkey := filepath.Join(data, logVKeyFile)

	// The receipt without its extra line: the leaf hash comes only from
	// --entry.
	noExtra := write("r-noextra", regexp.MustCompile(`(?m)^extra .*\n`).ReplaceAll([]byte(rc), nil))
	// One proof line changed.
	lines := strings.Split(rc, "\n")
	for i, l := range lines {
		if i > 2 && l != "" && !strings.HasPrefix(l, "index") && !strings.HasPrefix(l, "extra") {
			lines[i] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
			break
		}
	}
	badProof := write("r-badproof", []byte(strings.Join(lines, "\n")))

	// Another log with the same origin (a second data dir), and one with
	// another origin.
	sameOrigin := filepath.Join(t.TempDir(), "d")
	if err := keygen(sameOrigin, "provlog.test/export"); err != nil {
		t.Fatal(err)
	}
	otherOrigin := filepath.Join(t.TempDir(), "d")
	if err := keygen(otherOrigin, "example.org/other"); err != nil {
		t.Fatal(err)
	}

	// A file far larger than a receipt or an entry (sparse: no disk) is
	// refused by its size, not read whole.
	huge := write("huge", nil)
	if err := os.Truncate(huge, 64<<20); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"huge receipt", []string{"--vkey", vkey, huge}, "huge holds more than 1048576 bytes: it is not a receipt"},
		{"huge entry", []string{"--vkey", vkey, "--entry", huge, receipt}, "huge holds more than 1048560 bytes: it is not an entry"},
		{"exact entry", []string{"--vkey", vkey, "--entry", exact, receipt}, "OK: entry 1"},
		{"pretty entry", []string{"--vkey", vkey, "--entry", prettyFile, receipt}, "not the exact bytes the log holds"},
		{"pretty entry, no extra line", []string{"--vkey", vkey, "--entry", prettyFile, noExtra}, "not the exact bytes the log holds"},
		{"another entry", []string{"--vkey", vkey, "--entry", write("other.json", []byte(`{"v":1}`)), receipt}, "the receipt is for another entry"},
		{"same origin, other key", []string{"--vkey", filepath.Join(sameOrigin, logVKeyFile), receipt}, "the same name with another key"},
		{"other origin", []string{"--vkey", filepath.Join(otherOrigin, logVKeyFile), receipt}, `the checkpoint's origin is "provlog.test/export"`},
		{"changed proof", []string{"--vkey", vkey, badProof}, "the proof leads to root "},
	}
	hexRoot := regexp.MustCompile(`root [0-9a-f]{64}, but the checkpoint's root is [0-9a-f]{64}`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runCmd(t, append([]string{"verify-proof"}, tc.args...)...)
			if !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, output does not say %q:\n%s", code, tc.want, out)
			}
			if ok := strings.HasPrefix(tc.want, "OK"); ok != (code == 0) {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if strings.Contains(out, "[") || strings.Contains(out, "no verifiable signatures") {
				t.Fatalf("output shows the verifier's internals:\n%s", out)
			}
			if tc.name == "changed proof" && !hexRoot.MatchString(out) {
				t.Fatalf("root mismatch not in hex:\n%s", out)
			}
		})
	}
}

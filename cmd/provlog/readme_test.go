package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlocks returns the indented command blocks of one section of the
// repository's README.md, each joined into one script (continuation
// lines included); fenced blocks (```yaml) are not commands.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	var blocks []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		}
		cur = nil
	}
	fenced := false
	for _, line := range strings.Split(readmeSection(t, heading), "\n") {
		if strings.HasPrefix(line, "```") {
			flush()
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if code, ok := strings.CutPrefix(line, "    "); ok {
			cur = append(cur, code)
		} else if strings.TrimSpace(line) != "" {
			flush()
		}
	}
	flush()
	if len(blocks) == 0 {
		t.Fatalf("README.md has no command block under %q", heading)
	}
	return blocks
}

// readmeSection is the text of the README's section "## heading".
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// readmeFenced returns the README section's fenced blocks of language
// lang (```lang), in order.
func readmeFenced(t *testing.T, heading, lang string) []string {
	t.Helper()
	var blocks []string
	rest := readmeSection(t, heading)
	for {
		_, after, ok := strings.Cut(rest, "```"+lang+"\n")
		if !ok {
			break
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatalf("README section %q: a ```%s block that does not end", heading, lang)
		}
		blocks = append(blocks, block)
		rest = tail
	}
	if len(blocks) == 0 {
		t.Fatalf("README section %q has no ```%s block", heading, lang)
	}
	return blocks
}

// TestREADMETour installs the commands as the README says (into a
// temporary GOBIN) and runs the tour's block as a bash script in an empty
// directory, as a new user would paste it. Only the sidecar's port is
// changed, to a free one, so that the test does not depend on 8080.
func TestREADMETour(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the commands and runs the README's tour")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI: %v", tool, err)
			}
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	install := readmeBlocks(t, "Two commands for a fresh machine")
	var installCmd string
	for _, b := range install {
		if strings.HasPrefix(b, "go install ") {
			installCmd = b
		}
	}
	if installCmd == "" {
		t.Fatalf("the README's first section does not say how to install: %q", install)
	}
	bin := t.TempDir()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", installCmd)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", installCmd, err, out)
	}
	for _, name := range []string{"provlog", "provlog-witness"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s did not install %s: %v", installCmd, name, err)
		}
	}

	tour := readmeBlocks(t, "A short tour")
	if len(tour) != 1 {
		t.Fatalf("want the tour as one block, got %d", len(tour))
	}
	script := strings.ReplaceAll(tour[0], "127.0.0.1:8080", freeAddr(t))
	work := t.TempDir()
	cmd = exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's tour failed: %v\n%s", err, out)
	}
	for _, want := range []string{"OK: entry 0", "example.org/agent-7", "entries recomputed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tour output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(string(out), "OK: example.org/agent-7") != 2 {
		t.Errorf("want two audits (over HTTP, then of the data dir):\n%s", out)
	}
}

// TestREADMEHealthReasons: the README names every reason /healthz gives.
func TestREADMEHealthReasons(t *testing.T) {
	tour := readmeSection(t, "A short tour")
	for _, r := range healthReasons {
		if !strings.Contains(tour, "`"+r+"`") {
			t.Errorf("README's /healthz paragraph does not name the reason %s", r)
		}
	}
}

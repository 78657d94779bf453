package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestDataDirModes runs a real sidecar under umask 000, as a service
// started with a careless umask would be, twice (killed with -9 in
// between, so the second start replays the WAL into an sstable), with a
// downstream whose results are kept in blobs; then no file or directory it
// made in its data dir may be readable, writable or listable by anyone but
// its owner: a data dir copied elsewhere, or its db/ bind-mounted, must not
// expose an entry, a blob or a key.
func TestDataDirModes(t *testing.T) {
	fx := newEchoFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	cfg := filepath.Join(dir, "provlog.yaml")
	writeFile(t, cfg, fmt.Appendf(nil, "data: %s\nservers:\n  - id: fx\n    url: %s\n    retain: full\n", data, fx.url))
	for round := range 2 {
		p := startUmaskProc(t, "--config", cfg)
		tok, err := os.ReadFile(filepath.Join(data, "local.token"))
		if err != nil {
			t.Fatal(err)
		}
		cs := connectHTTP(t, p.base, strings.TrimSpace(string(tok)))
		for i := range 20 {
			if _, _, err := toolCall(cs, "fx__echo", map[string]any{"q": fmt.Sprintf("round %d call %d %s", round, i, strings.Repeat("x", 4096))}); err != nil {
				t.Fatal(err)
			}
		}
		callTool(t, cs, "create_task", map[string]any{"title": fmt.Sprintf("task %d", round)})
		resp, err := http.Get(p.base + "/log/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cs.Close()
		p.kill()
	}
	var open []string
	kinds := map[string]bool{}
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(data, path)
		kinds[fileKind(rel)] = true
		if fi.Mode().Perm()&0o077 != 0 {
			open = append(open, fmt.Sprintf("%04o %s", fi.Mode().Perm(), rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"sst", "wal", "manifest", "options", "blob", "served", "key"} {
		if !kinds[k] {
			t.Errorf("the data dir holds no %s file: the test did not make one", k)
		}
	}
	sort.Strings(open)
	if len(open) > 0 {
		t.Errorf("%d files or directories in the data dir are open to others under umask 000:\n%s", len(open), strings.Join(open, "\n"))
	}
}

// fileKind names what kind of file rel (a path in a data dir) is, for
// TestDataDirModes to check that it saw each.
func fileKind(rel string) string {
	base := filepath.Base(rel)
	switch {
	case strings.HasSuffix(base, ".sst"):
		return "sst"
	case strings.HasSuffix(base, ".log"):
		return "wal"
	case strings.HasPrefix(base, "MANIFEST-"):
		return "manifest"
	case strings.HasPrefix(base, "OPTIONS-"):
		return "options"
	case strings.HasPrefix(rel, "blobs"+string(filepath.Separator)) && !strings.Contains(base, "."):
		return "blob"
	case strings.HasPrefix(base, "served."):
		return "served"
	case base == "log.key":
		return "key"
	}
	return ""
}

// startUmaskProc is startSidecarProc with the sidecar's umask set to 000.
func startUmaskProc(t *testing.T, args ...string) *sidecarProc {
	t.Helper()
	p := &sidecarProc{t: t, args: args}
	addr := freeAddr(t)
	argv, _ := json.Marshal(append([]string{"serve", "--http", addr}, args...))
	child := childCmd(t, serveChildEnv+"="+string(argv))
	child.Args = append([]string{"sh", "-c", `umask 000 && exec "$@"`, "sh", child.Path}, child.Args[1:]...)
	child.Path = "/bin/sh"
	p.cmd = child
	p.stderr = &proctest.Buffer{}
	p.cmd.Stderr, p.cmd.Stdout = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	p.base = "http://" + addr
	cmdtest.WaitHealthy(t, p.base, (chan error)(nil), p.stderr)
	return p
}

package main

// Probe (config edits): `provlog token add` run as another user (sudo, an
// admin) hands the config file to that user, locking the sidecar out of
// its own config.
//
// What is wrong: addTokenToConfig keeps the file's mode but writes a new
// file (durable.WriteFile: temp file, rename), which belongs to whoever
// ran the command. A config of the sidecar's service user, 0600 as it
// should be for a file that may hold downstream headers, edited with
// `sudo provlog token add` becomes root's, 0600: the running sidecar's
// reload fails to read it ("config reload failed; the running config
// stays", so the new token and any revocation after it never apply) and
// the next `provlog serve` cannot start.
//
// Observed (as root): the config, owned by 65534:65534 before, is owned
// by 0:0 after a token add.
//
// Fix: in addTokenToConfig, fchown the temp file to the original's uid
// and gid before the rename (durable.WriteFile could take an owner, or
// a variant that copies owner and mode from the file it replaces), and
// refuse with a clear message if that is not permitted.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestProbeTokenAddKeepsOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a file of another user")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(cfg, []byte("data: ./d\nactors:\n  - id: alice\n    token_sha256: "+strings.Repeat("a", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const service = 65534 // the sidecar's service user (nobody here)
	if err := os.Chown(cfg, service, service); err != nil {
		t.Fatal(err)
	}
	addToken(t, cfg, "bob")
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != service || st.Gid != service {
		t.Errorf("after token add the config is owned by %d:%d (mode %v), was %d:%d: the sidecar's user can no longer read it",
			st.Uid, st.Gid, fi.Mode().Perm(), service, service)
	}
}

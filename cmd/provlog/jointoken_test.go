package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
)

// TestJoinRefusesOtherActorsToken: a stdio serve that joins a running
// sidecar acts as the config's stdio actor with the token in local.token;
// when that file holds another actor's token (written over after the
// sidecar started, and the joining serve's config does not list that
// actor, so loading it cannot tell), the join is refused, saying so. The
// joined serve acted as the other actor: its client's task was alice's.
func TestJoinRefusesOtherActorsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	bin := cmdtest.Build(t, "provlog")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	withActors := filepath.Join(dir, "sidecar.yaml")
	os.WriteFile(withActors, []byte("data: "+data+"\n"), 0o600)
	alice := addToken(t, withActors, "alice")
	sp, err := startFxSidecar(t, "--config", withActors)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.stop(t)
	if err := os.WriteFile(filepath.Join(data, localToken), []byte(alice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdioOnly := filepath.Join(dir, "desktop.yaml")
	os.WriteFile(stdioOnly, []byte("data: "+data+"\n"), 0o600)
	ss, err := connectStdio(t, bin, t.TempDir(), "--config", stdioOnly)
	if err == nil {
		got, _ := callTool(t, ss, "create_task", map[string]any{"title": "as whom?"})
		b, _ := json.Marshal(got)
		t.Fatalf("the stdio serve joined with another actor's token in %s: %s", localToken, b)
	}
	if !strings.Contains(err.Error(), localToken) {
		t.Errorf("the refusal does not name %s: %v", localToken, err)
	}
}

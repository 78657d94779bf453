package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestStoreUserNotShown: what a command says of a shared log in
// PostgreSQL names its host, port and database, never the user the
// sidecar connects as (nor the password): a command given only the data
// dir of a sidecar that served one, and a command given a config whose
// database refuses it.
func TestStoreUserNotShown(t *testing.T) {
	dsn := pgtest.DSN(t)
	var rb [6]byte
	rand.Read(rb[:])
	role := "provlog_user_" + hex.EncodeToString(rb[:])
	pgtest.Psql(t, dsn, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw-7c1d'")
	pgtest.Psql(t, dsn, "GRANT ALL ON SCHEMA "+pgtest.Psql(t, dsn, "SELECT current_schema()")+" TO "+role)
	t.Cleanup(func() { pgtest.Psql(t, dsn, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw-7c1d")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sc := mustOpenSidecar(t, &Config{Data: data, Actor: "local", Store: u.String()})
	sc.close()

	shows := func(what, out string) {
		t.Helper()
		if strings.Contains(out, role) || strings.Contains(out, "pw-7c1d") {
			t.Errorf("%s names the database's user or password: %s", what, out)
		}
	}
	out, rc := runCmd(t, "audit", "--data", data)
	if rc == 0 || !strings.Contains(out, "shared log in PostgreSQL") || !strings.Contains(out, u.Host) {
		t.Errorf("audit --data: exit %d, want a refusal naming the shared log at %s: %s", rc, u.Host, out)
	}
	shows("audit --data", out)

	down := *u
	down.Host = fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	cfg := writeFile(t, filepath.Join(dir, "provlog.yaml"), fmt.Appendf(nil, "data: %s\nstore: %q\n", data, down.String()))
	out, rc = runCmd(t, "audit", "--data", data, "--config", cfg)
	if rc == 0 || !strings.Contains(out, down.Host) {
		t.Errorf("audit of a database that is down: exit %d, want an error naming %s: %s", rc, down.Host, out)
	}
	shows("audit of a database that is down", out)
}

package logpg

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestErrorsNameNoUser: what the store says when the database refuses it
// (its errors, which reach stderr, /healthz and provlog__status, and its
// log lines) names the database's host, port and database, and never the
// user it connects as, nor the password: an unknown role, a role that
// cannot create the tables, a wrong password, a role refused logins after
// the store opened, a connection string that does not parse.
func TestErrorsNameNoUser(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	hostPort := admin.Host
	// check fails t if text names the user or the password, or (for an
	// error of a database reached) not the host and port and database.
	check := func(t *testing.T, what, text, user, password string, reached bool) {
		t.Helper()
		t.Logf("%s: %s", what, text)
		if strings.Contains(text, user) {
			t.Errorf("%s names the user %q: %s", what, user, text)
		}
		if password != "" && strings.Contains(text, password) {
			t.Errorf("%s names the password: %s", what, text)
		}
		if reached && (!strings.Contains(text, hostPort) || !strings.Contains(text, "database=postgres") && !strings.Contains(text, hostPort+"/postgres")) {
			t.Errorf("%s does not name the host and port (%s) and the database: %s", what, hostPort, text)
		}
	}
	as := func(u *url.URL, user *url.Userinfo) string {
		c := *u
		c.User = user
		return c.String()
	}

	t.Run("unknown role", func(t *testing.T) {
		role := newRole(t, dsn, "")
		pgtest.Psql(t, dsn, "DROP ROLE "+role)
		_, err := Open(t.Context(), as(admin, url.User(role)), nil)
		if err == nil {
			t.Fatal("Open as a role that does not exist succeeded")
		}
		check(t, "Open as an unknown role", err.Error(), role, "", true)
	})

	t.Run("no privilege", func(t *testing.T) {
		role := newRole(t, dsn, "")
		_, err := Open(t.Context(), as(admin, url.User(role)), nil)
		if err == nil {
			t.Fatal("Open as a role without privileges on the schema succeeded")
		}
		check(t, "Open as a role that cannot create tables", err.Error(), role, "", true)
	})

	t.Run("wrong password", func(t *testing.T) {
		c, port := passwordCluster(t)
		role := newRole(t, c.DSN, "right-password-7f3a")
		hostPort := fmt.Sprintf("127.0.0.1:%d", port)
		bad := fmt.Sprintf("postgres://%s:wrong-password-9c1e@%s/postgres?sslmode=disable", role, hostPort)
		_, err := Open(t.Context(), bad, nil)
		if err == nil {
			t.Fatal("Open with a wrong password succeeded")
		}
		text := err.Error()
		t.Logf("Open with a wrong password: %s", text)
		if strings.Contains(text, role) || strings.Contains(text, "wrong-password-9c1e") {
			t.Errorf("Open with a wrong password names the user or the password: %s", text)
		}
		if !strings.Contains(text, hostPort) || !strings.Contains(text, "password authentication failed") {
			t.Errorf("Open with a wrong password does not name %s and say what failed: %s", hostPort, text)
		}
	})

	t.Run("refused later", func(t *testing.T) {
		role := newRole(t, dsn, "")
		schema := pgtest.Psql(t, dsn, "SELECT current_schema()")
		pgtest.Psql(t, dsn, "GRANT ALL ON SCHEMA "+schema+" TO "+role)
		t.Cleanup(func() { pgtest.Psql(t, dsn, "DROP OWNED BY "+role) })
		var mu sync.Mutex
		var lines strings.Builder
		logf := func(format string, args ...any) {
			mu.Lock()
			fmt.Fprintf(&lines, format+"\n", args...)
			mu.Unlock()
		}
		s, err := Open(t.Context(), as(admin, url.User(role)), &Options{Logf: logf, ResolveTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		commitShared(t, s, "a", 2)
		pgtest.Psql(t, dsn, "ALTER ROLE "+role+" NOLOGIN")
		pgtest.Psql(t, dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'")
		for i := 0; s.Unreachable() == nil; i++ {
			if i == 3000 {
				t.Fatal("the store never found the database refusing its role")
			}
			time.Sleep(20 * time.Millisecond)
		}
		check(t, "Unreachable", s.Unreachable().Error(), role, "", true)
		_, err = s.Entries(t.Context(), 0, 1)
		if err == nil {
			t.Fatal("Entries as a role refused logins succeeded")
		}
		check(t, "Entries", err.Error(), role, "", true)
		err = s.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
			return buildOn(t, st, "b", 1), nil
		})
		if err == nil {
			t.Fatal("a commit as a role refused logins succeeded")
		}
		check(t, "CommitShared", err.Error(), role, "", true)
		if e := s.Err(); e != nil {
			check(t, "Err", e.Error(), role, "", false)
		}
		mu.Lock()
		check(t, "the store's log lines", lines.String(), role, "", false)
		mu.Unlock()
	})

	t.Run("unparsable", func(t *testing.T) {
		_, err := Open(t.Context(), "postgres://provlog_parse_user:parse-secret@127.0.0.1:x/db", nil)
		if err == nil {
			t.Fatal("Open of a connection string that does not parse succeeded")
		}
		check(t, "a connection string that does not parse", err.Error(), "provlog_parse_user", "parse-secret", false)
	})
}

// newRole makes a role that can log in (with password, if not empty) on
// the cluster of the superuser DSN admin, dropped when the test ends.
func newRole(t *testing.T, admin, password string) string {
	t.Helper()
	var rb [6]byte
	rand.Read(rb[:])
	role := "provlog_u_" + hex.EncodeToString(rb[:])
	sql := "CREATE ROLE " + role + " LOGIN"
	if password != "" {
		sql += " PASSWORD '" + password + "'"
	}
	pgtest.Psql(t, admin, sql)
	t.Cleanup(func() { pgtest.Psql(t, admin, "DROP ROLE IF EXISTS "+role) })
	return role
}

// passwordCluster starts a cluster of the test's own where every user but
// postgres logs in over TCP with a password (SCRAM), and returns it and
// its port.
func passwordCluster(t *testing.T) (*pgtest.Cluster, int) {
	t.Helper()
	dir, err := os.MkdirTemp("", "provlog-hba.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(dir, "pg_hba.conf")
	rules := "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hba, 0o644); err != nil {
		t.Fatal(err)
	}
	c := pgtest.NewCluster(t, "hba_file="+hba)
	u, err := url.Parse(c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	var port int
	fmt.Sscan(u.Port(), &port)
	return c, port
}

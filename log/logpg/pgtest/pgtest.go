// Package pgtest gives tests real PostgreSQL: a fresh database on the
// cluster tools/pgtest/start.sh started (DSN), or a cluster of their own
// that they may stop and start (NewCluster), for failover tests.
//
// The cluster is found through the variables start.sh prints:
// PROVLOG_TEST_POSTGRES (a superuser DSN) and PROVLOG_PG_BIN (initdb,
// pg_ctl, psql). Without them a test is skipped, but under CI=true it
// fails: a missing PostgreSQL is never reported as passing.
package pgtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// missing skips t, or fails it under CI.
func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + `: start a throwaway cluster with: eval "$(bash tools/pgtest/start.sh)"`
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Bin returns the directory holding PostgreSQL's programs.
func Bin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("PROVLOG_PG_BIN"); b != "" {
		return b
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) > 0 {
		return filepath.Dir(m[len(m)-1])
	}
	missing(t, "no PostgreSQL binaries (PROVLOG_PG_BIN is not set)")
	return ""
}

// DSN returns the connection string of a new, empty schema on the test
// cluster (the DSN's options set search_path to it), dropped when the test ends. A schema
// costs milliseconds where a database costs most of a second.
func DSN(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("PROVLOG_TEST_POSTGRES")
	if admin == "" {
		missing(t, "PROVLOG_TEST_POSTGRES is not set")
	}
	bin := Bin(t)
	var rb [6]byte
	rand.Read(rb[:])
	name := "provlog_t_" + hex.EncodeToString(rb[:])
	psql(t, bin, admin, "CREATE SCHEMA "+name)
	t.Cleanup(func() { psql(t, bin, admin, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("PROVLOG_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("options", "-c search_path="+name)                // understood by pgx and psql alike
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + as itself
	return u.String()
}

// Psql runs one SQL command on dsn and returns its unaligned output.
func Psql(t testing.TB, dsn, sql string) string {
	t.Helper()
	return psql(t, Bin(t), dsn, sql)
}

func psql(t testing.TB, bin, dsn, sql string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// A Cluster is a PostgreSQL cluster a test started for itself.
type Cluster struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	opts []string // server settings, name=value
	// DSN connects to its postgres database as the superuser.
	DSN string
}

// NewCluster starts a cluster in a temp dir (initdb as the postgres user
// when run as root), stopped when the test ends. Each of settings
// (name=value) is passed to the server as -c.
func NewCluster(t testing.TB, settings ...string) *Cluster {
	t.Helper()
	bin := Bin(t)
	dir, err := os.MkdirTemp("", "provlog-pgc.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown postgres %s: %v\n%s", dir, err, out)
		}
	}
	c := &Cluster{t: t, bin: bin, dir: dir, port: proctest.FreePort(t), opts: settings}
	c.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	c.run("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	c.Start()
	t.Cleanup(func() { c.Stop("immediate") })
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	o := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", c.port, c.dir)
	for _, kv := range c.opts {
		o += " -c " + kv
	}
	c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "-o", o, "start")
}

// Stop stops the server with the given pg_ctl mode (smart, fast,
// immediate); stopping a stopped server is not an error.
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	cmd := c.cmd("pg_ctl", "-D", c.data(), "-m", mode, "-w", "stop")
	cmd.Run()
}

func (c *Cluster) cmd(prog string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, prog)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (c *Cluster) run(prog string, args ...string) {
	c.t.Helper()
	out, err := c.cmd(prog, args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("%s %s: %v\n%s\n%s", prog, strings.Join(args, " "), err, out, log)
	}
}

// Freeze stops (SIGSTOP) the server, the postmaster and every backend, as
// a hung database host or a network that drops packets leaves it:
// connections stay open and nothing answers. It returns the thaw (SIGCONT),
// which the test's end also runs.
func (c *Cluster) Freeze() (thaw func()) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		c.t.Fatal(err)
	}
	pm := strings.SplitN(string(b), "\n", 2)[0]
	out, _ := exec.Command("ps", "-o", "pid=", "--ppid", pm).Output()
	pids := append([]string{pm}, strings.Fields(string(out))...)
	if out, err := exec.Command("kill", append([]string{"-STOP"}, pids...)...).CombinedOutput(); err != nil {
		c.t.Fatalf("kill -STOP %v: %v\n%s", pids, err, out)
	}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			exec.Command("kill", append([]string{"-CONT"}, pids...)...).Run()
		}
	}
	c.t.Cleanup(thaw)
	return thaw
}

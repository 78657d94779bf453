package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/witness/witnesstest"
)

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPathsRelativeToFile: a client such as Claude Desktop starts
// provlog in a directory of its own choosing; the config's relative paths
// must still name the files beside the config, or a second log is made.
func TestConfigPathsRelativeToFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "provlog")
	cases := []struct {
		name, text string
		data       string
		srvDir     string
		command0   string
	}{
		{"relative", "data: ./d\nservers:\n  - {id: a, command: [./bin/srv, x], dir: work}\n",
			filepath.Join(dir, "d"), filepath.Join(dir, "work"), filepath.Join(dir, "bin", "srv")},
		{"default data beside the config", "servers:\n  - {id: a, command: [npx, y]}\n",
			filepath.Join(dir, "provlog-data"), "", "npx"},
		{"absolute kept", "data: /var/lib/provlog\nservers:\n  - {id: a, command: [/usr/bin/srv], dir: /tmp}\n",
			"/var/lib/provlog", "/tmp", "/usr/bin/srv"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(writeConfig(t, dir, tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Data != tc.data {
				t.Errorf("data = %q, want %q", cfg.Data, tc.data)
			}
			s := cfg.Servers[0]
			if s.Dir != tc.srvDir || s.Command[0] != tc.command0 {
				t.Errorf("server dir %q command %q, want %q %q", s.Dir, s.Command[0], tc.srvDir, tc.command0)
			}
		})
	}
	// No config: the data dir is the working directory's.
	cfg, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Data != "provlog-data" {
		t.Errorf("default data = %q", cfg.Data)
	}
}

// TestServeFromOtherDirectory runs serve as a client would, from another
// working directory, and checks that it opened the data dir beside the
// config and made no second one.
func TestServeFromOtherDirectory(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "data: ./provlog-data\norigin: example.org/one\n")
	if out, code := runCmd(t, "keygen", "--origin", "example.org/one", "--data", filepath.Join(dir, "provlog-data")); code != 0 {
		t.Fatal(out)
	}
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	base, stop := startServe(t, "--config", cfgPath)
	_ = base
	stop()
	if des, _ := os.ReadDir(elsewhere); len(des) != 0 {
		t.Fatalf("serve made %v in its working directory", des[0].Name())
	}
	if _, err := os.Stat(filepath.Join(dir, "provlog-data", localToken)); err != nil {
		t.Fatalf("serve did not use the data dir beside the config: %v", err)
	}
}

// TestServePortTaken: a taken port fails before any key or data dir is
// made.
func TestServePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "fresh")
	out, code := runCmd(t, "serve", "--data", data, "--http", ln.Addr().String())
	if code == 0 || !strings.Contains(out, "cannot serve on "+ln.Addr().String()) {
		t.Fatalf("exit %d: %s", code, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("serve on a taken port left %s behind (%v)", data, err)
	}
}

// TestConfigErrors: a bad config says what and where, once.
func TestConfigErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"duration without unit", "servers:\n  - id: a\n    command: [x]\n    timeout: 60\n",
			`line 4: servers[0].timeout: "60" has no unit: write it as 30s, 2m or 2ms`},
		{"commit_delay without unit", "commit_delay: 5\n", `line 1: commit_delay: "5" has no unit`},
		{"anchor timeout without unit", "anchors:\n  interval: 1m\n  timeout: 60\n", `line 3: anchors.timeout: "60" has no unit`},
		{"witness interval not a duration", "witnesses:\n  - {url: http://a, vkey: k}\nwitness_policy:\n  interval: soon\n",
			`line 4: witness_policy.interval: "soon" is not a duration such as 30s, 2m or 2ms`},
		{"negative retention", "retention:\n  max_age: -1h\n", `line 2: retention.max_age: duration "-1h" is negative`},
		{"duration as a list", "scrub_interval: [1s]\n", `line 1: scrub_interval: want a duration`},
		{"negative session cap", "sessions:\n  max: -1\n", `config: sessions.max: -1 is negative`},
		{"negative parking cap", "parking: {max: -5}\n", `config: parking.max: -5 is negative`},
		{"parking timeout without unit", "parking:\n  timeout: 30\n", `line 2: parking.timeout: "30" has no unit`},
		// An actor's share of a cap: not negative, not more than the cap
		// (given, or its default).
		{"negative session share", "sessions:\n  per_actor: -1\n", `config: sessions.per_actor: -1 is negative`},
		{"session share over the cap", "sessions: {max: 10, per_actor: 11}\n", `config: sessions.per_actor: 11 is more than sessions.max (10), which it is a share of`},
		{"parking share over the default cap", "parking: {per_actor: 300}\n", `config: parking.per_actor: 300 is more than parking.max (256)`},
		{"negative subscription cap", "subscriptions: {max: -3}\n", `config: subscriptions.max: -3 is negative`},
		{"subscription share over the cap", "subscriptions: {max: 100, per_actor: 101}\n", `config: subscriptions.per_actor: 101 is more than subscriptions.max (100)`},
		{"session's subscriptions over the default cap", "subscriptions: {per_session: 20000}\n", `config: subscriptions.per_session: 20000 is more than subscriptions.max (10000)`},
		{"subscription cap misspelt", "subscriptions: {per_sesion: 5}\n", `per_sesion`},
		{"duplicate server id", "servers:\n  - {id: a, command: [x]}\n  - {id: a, command: [y]}\n",
			`config: servers: id "a" is used twice`},
	}
	// A witness listed twice, or a key that is not one, is refused with
	// the config, before a data dir or keys are made (serve made both,
	// then refused the policy).
	wk := witnesstest.NewCosigner(t, "witness.example/w1").Verifier().String()
	cases = append(cases,
		struct{ name, text, want string }{"witness twice", "witnesses:\n  - {url: http://a, vkey: " + wk + "}\n  - {url: http://b, vkey: " + wk + "}\n",
			"config: witness_policy: witness policy: witness witness.example/w1"},
		struct{ name, text, want string }{"witness key not one", "witnesses:\n  - {url: http://a, vkey: nope}\n", "config: witnesses[0]:"},
		// Nobody acts as the sidecar itself, or under an id that reads
		// as another.
		struct{ name, text, want string }{"the sidecar's own actor", "actors:\n  - {id: provlog, token_sha256: " + strings.Repeat("a", 64) + "}\n", `actor id "provlog" is the sidecar's own`},
		struct{ name, text, want string }{"an actor id with a line end", "actors:\n  - {id: \"a\\nb\", token_sha256: " + strings.Repeat("a", 64) + "}\n", "holds a control character"},
		struct{ name, text, want string }{"stdio actor", "actor: \" local\"\n", "config: actor: actor id \" local\" has space"},
		// Nor under an id of provlog's namespace, which a reader takes
		// for provlog's own entries; the error names the key.
		struct{ name, text, want string }{"stdio actor provlog's own", "actor: provlog.operator\n",
			`config: actor: actor id "provlog.operator" is the sidecar's own: "provlog" and every id beginning "provlog."`},
		struct{ name, text, want string }{"token actor provlog's own", "actors:\n  - {id: alice, token_sha256: " + strings.Repeat("a", 64) + "}\n  - {id: provlog.retention, token_sha256: " + strings.Repeat("b", 64) + "}\n",
			`config: actors[1].id: actor id "provlog.retention" is the sidecar's own`},
		struct{ name, text, want string }{"reader provlog's own", "readers:\n  - {id: Provlog.Auditor, token_sha256: " + strings.Repeat("a", 64) + "}\n",
			`config: readers[0].id: actor id "Provlog.Auditor" is the sidecar's own`},
		struct{ name, text, want string }{"purger provlog's own", "retention:\n  purgers: [local, provlog.operator]\n",
			`config: retention.purgers[1]: actor id "provlog.operator" is the sidecar's own`},
		// Nor under one that reads as provlog's: Cyrillic o, ONE DOT
		// LEADER.
		struct{ name, text, want string }{"reader looks like provlog's own", "readers:\n  - {id: \"pr\\u043evlog.auditor\", token_sha256: " + strings.Repeat("a", 64) + "}\n",
			`config: readers[0].id: actor id "prоvlog.auditor" looks like one of the sidecar's own`},
		struct{ name, text, want string }{"purger looks like provlog's own", "retention:\n  purgers: [local, \"provlog\\u2024operator\"]\n",
			`config: retention.purgers[1]: actor id "provlog․operator" looks like one of the sidecar's own`})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(writeConfig(t, t.TempDir(), tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if strings.Count(err.Error(), "config") > 2 {
				t.Fatalf("err repeats itself: %v", err)
			}
		})
	}
}

// TestConfigParking: parking: sets the proxy's bounds on parked calls;
// left out, both are zero, which the proxy takes as its defaults.
func TestConfigParking(t *testing.T) {
	for _, tc := range []struct {
		text string
		want ParkingConfig
	}{
		{"parking: {max: 3, timeout: 250ms}\n", ParkingConfig{Max: 3, Timeout: 250 * time.Millisecond}},
		{"actor: local\n", ParkingConfig{}},
	} {
		cfg, err := loadConfig(writeConfig(t, t.TempDir(), tc.text))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Parking != tc.want {
			t.Errorf("%q: parking %+v, want %+v", tc.text, cfg.Parking, tc.want)
		}
	}
}

// TestConfigInvisibleActor: an actor id holding a character that shows as
// nothing is refused when a config is read or a token added, naming the
// character and where it is. A log an older provlog wrote under such an
// id (it let the config through) still reads and audits clean: the
// check applies to configs, not to the entries of a log.
func TestConfigInvisibleActor(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	const want = "U+200B, at character 6"
	for _, text := range []string{
		"actor: \"alice\\u200b\"\n",
		"actors:\n  - {id: \"alice\\u200b\", token_sha256: " + strings.Repeat("a", 64) + "}\n",
	} {
		if _, err := loadConfig(writeConfig(t, dir, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", text, err, want)
		}
	}
	cfgFile := writeConfig(t, dir, "data: "+data+"\n")
	if out, code := runCmd(t, "token", "add", "--config", cfgFile, "--actor", "alice\u200b"); code != 2 || !strings.Contains(out, want) {
		t.Errorf("token add of alice\\u200b: exit %d: %s", code, out)
	}

	// No marshaller of this provlog writes such an actor any more
	// (TestEntryActorShows), so the old log's entries are forged as bytes.
	ctx := context.Background()
	old := "alice\u200b"
	sc := mustOpenSidecar(t, &Config{Data: data})
	appendAs := func(m interface{ Marshal() ([]byte, error) }) uint64 {
		t.Helper()
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := sc.seq.Append(ctx, withActor(t, b, old))
		if err != nil {
			t.Fatal(err)
		}
		return rc.Index
	}
	task := "t_" + strings.Repeat("cd", 16)
	now := time.Now()
	appendAs(&log.TaskEntry{Kind: log.KindTaskCreate, Time: now, Actor: "forged", TaskID: task, Title: "old"})
	appendAs(&log.TaskEntry{Kind: log.KindTaskAccept, Time: now, Actor: "forged", TaskID: task})
	call := appendAs(&log.CallEntry{Time: now, Actor: "forged", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)})
	// Its outcome, which an observed claim needs in the log before it.
	appendAs(&log.CallResultEntry{Time: now, Actor: "forged", Call: call, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
	appendAs(&log.TaskEntry{Kind: log.KindTaskClaim, Time: now, Actor: "forged", TaskID: task, Provenance: string(opp.Observed), Summary: "done", Evidence: []uint64{call}})
	sc.close()
	if out, code := runCmd(t, "audit", "--data", data); code != 0 || !strings.Contains(out, "1 tasks rebuilt") {
		t.Fatalf("audit of a log naming %q: exit %d:\n%s", old, code, out)
	}
	// tasks show writes the id with its invisible character by number.
	if out, code := runCmd(t, "tasks", "--data", data, "show", task); code != 0 || !strings.Contains(out, `by alice\u200b`) || !strings.Contains(out, "completed") {
		t.Fatalf("tasks show: exit %d:\n%s", code, out)
	}
}

// mustResult fails the test on an error from a task operation.
func mustResult(t *testing.T) func(*opp.Result, error) *opp.Result {
	return func(r *opp.Result, err error) *opp.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// TestConfigOneDocument: a config file is one YAML document. A second
// one (an edit appended after "---") is refused, not passed over: a
// reload that took only the first would say "config reloaded" while the
// actors the operator revoked below the marker kept acting.
func TestConfigOneDocument(t *testing.T) {
	for _, text := range []string{
		"reload_interval: 1s\n---\nactors: []\n",
		"reload_interval: 1s\n---\nactors: [\n",
		"---\nreload_interval: 1s\n---\nnot_a_key: 1\n",
	} {
		_, err := loadConfig(writeConfig(t, t.TempDir(), text))
		if err == nil || !strings.Contains(err.Error(), "document") {
			t.Errorf("%q: error %v, want one naming the second document", text, err)
		}
	}
	for _, text := range []string{"---\nreload_interval: 1s\n", "reload_interval: 1s\n...\n", ""} {
		if _, err := loadConfig(writeConfig(t, t.TempDir(), text)); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// TestConfigErrorsRedactURLs: a config refused for a server's url names
// the url without its credentials: the error reaches stderr, at start and
// from a reload.
func TestConfigErrorsRedactURLs(t *testing.T) {
	for _, u := range []string{"ftp://u:pw-s3cret@h/x", "http://u:pw-s3cret@h x/", "ftp://h/x?key=s3cret"} {
		_, err := loadConfig(writeConfig(t, t.TempDir(), "servers:\n  - {id: a, url: \""+u+"\"}\n"))
		if err == nil || !strings.Contains(err.Error(), "not an http(s) URL") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("url %s: error %v, want it refused without its credentials", u, err)
		}
	}
}

// TestConfigServerHeaders: a url server's headers that are no HTTP
// header (net/http refuses to send them, so every request to the server
// would fail) are refused when the config is read, naming the header, not
// its value.
func TestConfigServerHeaders(t *testing.T) {
	for _, h := range []string{`{"bad name": x}`, `{Authorization: "Bearer s3cret\r\nX-Other: 1"}`} {
		_, err := loadConfig(writeConfig(t, t.TempDir(), "servers:\n  - {id: a, url: \"http://h/x\", headers: "+h+"}\n"))
		if err == nil || !strings.Contains(err.Error(), "header") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("headers %s: error %v, want it refused without its value", h, err)
		}
	}
}

// TestServerURLCredentialsNotLogged: a url server that cannot be reached
// is reported (stderr, /healthz) with its url redacted: credentials in its
// userinfo or query never leave the process.
func TestServerURLCredentialsNotLogged(t *testing.T) {
	closed := freeAddr(t) // nothing listens there
	cfg := writeConfig(t, t.TempDir(), "data: ./d\nservers:\n"+
		"  - {id: q, url: \"http://"+closed+"/mcp?api_key=s3cret-q\"}\n"+
		"  - {id: u, url: \"http://user:s3cret-u@"+closed+"/mcp\"}\n")
	base, _, stderr := startServeLogged(t, freeAddr(t), "--config", cfg)
	waitFor(t, "both servers' failures are logged", func() bool {
		return strings.Contains(stderr.String(), "server=q") && strings.Contains(stderr.String(), "server=u")
	})
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for what, text := range map[string]string{"stderr": stderr.String(), "/healthz": string(b)} {
		if strings.Contains(text, "s3cret") {
			t.Errorf("%s carries a server url's credentials: %s", what, text)
		}
	}
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokenWorks reports whether the log API accepts a bearer token.
func tokenWorks(t *testing.T, base, token string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/log/entry/0", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// TestConfigReload: a token added while the sidecar runs works without a
// restart, and a session open across the reload keeps working.
func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 50ms\n"), 0o600)
	alice := addToken(t, cfg, "alice")
	base, _ := startServe(t, "--config", cfg)
	cs := connectHTTP(t, base, alice)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "before"})

	bob := addToken(t, cfg, "bob")
	waitFor(t, "bob's new token works", func() bool { return tokenWorks(t, base, bob) })
	got, _ := callTool(t, cs, "get_task_status", map[string]any{"task_id": created["task_id"]})
	if got == nil {
		t.Fatal("alice's session broke across the reload")
	}
	bs := connectHTTP(t, base, bob)
	callTool(t, bs, "create_task", map[string]any{"title": "by bob"})

	// A broken edit changes nothing.
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte("servers: [\n")...), 0o600)
	time.Sleep(200 * time.Millisecond) // several reload intervals
	if !tokenWorks(t, base, alice) || !tokenWorks(t, base, bob) {
		t.Fatal("a config that does not load replaced the running tokens")
	}
	// Removing a token takes it away.
	os.WriteFile(cfg, []byte(strings.Split(string(b), "  - id: \"bob\"")[0]), 0o600)
	waitFor(t, "bob's removed token is refused", func() bool { return !tokenWorks(t, base, bob) })
	if !tokenWorks(t, base, alice) {
		t.Fatal("alice's token stopped working")
	}
}

// TestConfigReloadSIGHUP: with polling off, SIGHUP applies the change.
func TestConfigReloadSIGHUP(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 0s\n"), 0o600)
	base, _ := startServe(t, "--config", cfg)
	carol := addToken(t, cfg, "carol")
	time.Sleep(100 * time.Millisecond)
	if tokenWorks(t, base, carol) {
		t.Fatal("with reload_interval: 0s the token works before SIGHUP")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "carol's token works after SIGHUP", func() bool { return tokenWorks(t, base, carol) })
}

// TestRestartKeys: a reload names the keys it did not apply.
func TestRestartKeys(t *testing.T) {
	dir := t.TempDir()
	a, err := loadConfig(writeConfig(t, dir, "data: ./d\nservers:\n  - {id: a, command: [x]}\nactors: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadConfig(writeConfig(t, dir, "data: ./e\nservers:\n  - {id: a, command: [y]}\nactors:\n  - {id: z, token_sha256: "+h1+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(restartKeys(a, b, nil), ","); got != "data" {
		t.Errorf("restart keys %q, want data (servers reload live)", got)
	}
	if got := strings.Join(restartKeys(a, b, map[string]bool{"data": true}), ","); got != "" {
		t.Errorf("with --data: restart keys %q, want none", got)
	}
}

// TestConfigReloadServers: editing servers: while the sidecar runs adds,
// restarts and removes downstreams (real processes: this test binary as
// the sidefx server), while a client's session stays open; an edit that
// does not load changes nothing.
func TestConfigReloadServers(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	const token = "reload-servers-token"
	sum := sha256.Sum256([]byte(token))
	server := func(id, file string) map[string]any {
		return map[string]any{"id": id, "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(dir, file)}}
	}
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(servers ...map[string]any) {
		b, _ := json.Marshal(map[string]any{ // JSON is YAML
			"data": filepath.Join(dir, "d"), "reload_interval": "50ms", "servers": servers,
			"actors": []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		})
		// As editors do: a new file renamed over the old, so the
		// sidecar never reads half of it.
		if err := os.WriteFile(cfgPath+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write(server("a", "a1.txt"))
	base, stop := startServe(t, "--config", cfgPath)
	cs := connectHTTP(t, base, token)
	ctx := context.Background()
	// lands reports whether a call of tool with text reaches file.
	n := 0
	lands := func(tool, file string) bool {
		n++
		text := fmt.Sprintf("probe-%d", n)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			return false
		}
		b, _ := os.ReadFile(filepath.Join(dir, file))
		return strings.Contains(string(b), text+"\n")
	}
	waitFor(t, "a__append works", func() bool { return lands("a__append", "a1.txt") })

	write(server("a", "a1.txt"), server("b", "b.txt"))
	waitFor(t, "the added server b answers", func() bool { return lands("b__append", "b.txt") })

	write(server("a", "a2.txt"), server("b", "b.txt"))
	waitFor(t, "a, changed, restarts with its new entry", func() bool { return lands("a__append", "a2.txt") })

	write(server("a", "a2.txt"))
	waitFor(t, "the removed server b is gone", func() bool {
		lt, err := cs.ListTools(ctx, nil)
		return err == nil && !slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "b__append" })
	})
	if lands("b__append", "b.txt") {
		t.Error("a removed server still takes calls")
	}

	// A duplicate id does not load: the running servers stay.
	write(server("a", "a3.txt"), server("a", "a4.txt"))
	time.Sleep(300 * time.Millisecond) // several reload intervals
	if !lands("a__append", "a2.txt") {
		t.Error("a config that does not load changed the running servers")
	}
	// The log written through every change audits.
	cs.Close()
	stop()
	if out, code := runCmd(t, "audit", "--data", filepath.Join(dir, "d")); code != 0 {
		t.Errorf("audit after the reloads: %s", out)
	}
}

// TestConfigReloadDrainsTogether: a reload that removes two servers, each
// with a call under way that does not end (real processes: the sidefx
// server), drains them side by side: the one drain_timeout cuts both
// calls at once, in one warning naming both, before either server is
// stopped; one after the other would take a bound each, a warning each.
func TestConfigReloadDrainsTogether(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	const token = "drain-together-token"
	sum := sha256.Sum256([]byte(token))
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(ids ...string) {
		var servers []map[string]any
		for _, id := range ids {
			servers = append(servers, map[string]any{"id": id, "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(dir, id+".txt")}})
		}
		b, _ := json.Marshal(map[string]any{
			"data": filepath.Join(dir, "d"), "reload_interval": "50ms", "drain_timeout": "300ms", "servers": servers,
			"actors": []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		})
		if err := os.WriteFile(cfgPath+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "b", "c")
	base, stop, stderr := startServeLogged(t, freeAddr(t), "--config", cfgPath)
	cs := connectHTTP(t, base, token)
	waitFor(t, "the servers' tools are listed", func() bool {
		lt, err := cs.ListTools(context.Background(), nil)
		return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "a__append" }) &&
			slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "b__append" })
	})
	answers := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: id + "__append",
				Arguments: map[string]any{"text": "busy", "until_file": filepath.Join(dir, "never")}})
			answers <- err
		}()
	}
	for _, id := range []string{"a", "b"} {
		waitFor(t, id+"'s call is under way", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, id+".txt"))
			return strings.Contains(string(b), "busy\n")
		})
	}
	write("c")
	for range 2 {
		if err := <-answers; err == nil || !strings.Contains(err.Error(), "was removed from the configuration") {
			t.Errorf("a call cut by the drain: %v, want it told the server was removed", err)
		}
	}
	waitFor(t, "the reload is done", func() bool { return strings.Contains(stderr.String(), "config reload: servers changed") })
	cs.Close()
	stop()

	var events []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		switch {
		case strings.Contains(line, "calls were still under way at the end of the drain"):
			ev := "cut"
			if strings.Contains(line, `servers="[a b]"`) {
				ev = "cut a b"
			}
			events = append(events, ev)
		case strings.Contains(line, "proxy: server removed"):
			events = append(events, "removed")
		}
	}
	if want := []string{"cut a b", "removed", "removed"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q:\n%s", events, want, stderr.String())
	}
}

// TestRevokeDuringDrain: a token taken away by a reload is refused at
// once, while an earlier reload still drains a removed server's call.
// The server reload ran on the config loop, so the revocation waited
// for the whole drain (up to drain_timeout, 30 s by default), and the
// revoked token made calls all the while.
func TestRevokeDuringDrain(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	sums := map[string]string{}
	for _, who := range []string{"alice", "bob"} {
		s := sha256.Sum256([]byte(who + "-token"))
		sums[who] = hex.EncodeToString(s[:])
	}
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(servers []string, actors ...string) {
		var ss, as []map[string]any
		for _, id := range servers {
			ss = append(ss, map[string]any{"id": id, "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(dir, id+".txt")}})
		}
		for _, a := range actors {
			as = append(as, map[string]any{"id": a, "token_sha256": sums[a]})
		}
		b, _ := json.Marshal(map[string]any{"data": filepath.Join(dir, "d"), "reload_interval": "50ms", "drain_timeout": "2m", "servers": ss, "actors": as})
		os.WriteFile(cfgPath+".new", b, 0o600)
		os.Rename(cfgPath+".new", cfgPath)
	}
	write([]string{"a", "b"}, "alice", "bob")
	base, _, stderr := startServeLogged(t, freeAddr(t), "--config", cfgPath)
	cs := connectHTTP(t, base, "alice-token")
	waitFor(t, "a's tools are listed", func() bool {
		lt, err := cs.ListTools(context.Background(), nil)
		return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "a__append" })
	})
	release := filepath.Join(dir, "release")
	t.Cleanup(func() { os.WriteFile(release, nil, 0o600) }) // let the busy call end
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "a__append", Arguments: map[string]any{"text": "busy", "until_file": release}})
	waitFor(t, "a's call is under way", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
		return strings.Contains(string(b), "busy\n")
	})
	write([]string{"b"}, "alice", "bob") // a drains its call, for up to 2 minutes
	waitFor(t, "the reload that removes a", func() bool { return strings.Count(stderr.String(), "config reloaded") >= 1 })
	if !tokenWorks(t, base, "bob-token") {
		t.Fatal("bob's token is refused before it was revoked")
	}
	write([]string{"b"}, "alice") // bob revoked while a still drains
	waitFor(t, "bob's revoked token is refused", func() bool { return !tokenWorks(t, base, "bob-token") })
	if strings.Contains(stderr.String(), "proxy: server removed") {
		t.Fatal("the drain ended before the revocation; the test shows nothing")
	}
}

// TestConfigReloadChangeUnderCalls: a reload that changes the env of a
// server three clients are calling without pause (two 2025-11-25
// sessions and a sessionless 2026-07-28 client; real processes: the
// sidefx server) replaces it without refusing a call: each client's
// calls go on, to the new instance once it is up; and the log audits.
func TestConfigReloadChangeUnderCalls(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	const token = "change-under-calls-token"
	sum := sha256.Sum256([]byte(token))
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(file string) {
		b, _ := json.Marshal(map[string]any{
			"data": filepath.Join(dir, "d"), "reload_interval": "50ms",
			"servers": []map[string]any{{"id": "a", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(dir, file)}}},
			"actors":  []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		})
		if err := os.WriteFile(cfgPath+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write("a1.txt")
	base, stop := startServe(t, "--config", cfgPath)
	stateless, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-stateless", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stateless.Close()
	clients := []*mcp.ClientSession{connectHTTP(t, base, token), connectHTTP(t, base, token), stateless}
	ctx := context.Background()
	// from reports whether file has a line of every client.
	from := func(file string) bool {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		for i := range clients {
			if !strings.Contains(string(b), fmt.Sprintf("c%d-", i)) {
				return false
			}
		}
		return true
	}
	done := make(chan struct{})
	errs := make(chan error, len(clients))
	calls := make([]int, len(clients))
	var wg sync.WaitGroup
	for i, cs := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				text := fmt.Sprintf("c%d-%d", i, n)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__append", Arguments: map[string]any{"text": text}})
				if err == nil && res.IsError {
					err = fmt.Errorf("%s", contentText(res))
				}
				if err != nil {
					errs <- fmt.Errorf("call %s: %v", text, err)
					return
				}
				calls[i]++
			}
		})
	}
	waitFor(t, "every client's calls reach a", func() bool { return from("a1.txt") })
	write("a2.txt")
	waitFor(t, "every client's calls reach a's new instance, or one is refused", func() bool { return from("a2.txt") || len(errs) > 0 })
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("calls per client: %v", calls)
	for _, cs := range clients {
		cs.Close()
	}
	stop()
	if out, code := runCmd(t, "audit", "--data", filepath.Join(dir, "d")); code != 0 {
		t.Errorf("audit after the reload: %s", out)
	}
}

// TestReloadFlagKeysNotRestartKeys: serve's flags (--verify-on-open here, and
// likewise --data and --store) set keys the config file does not hold; a
// reload that changes none of them must not say they changed and need a
// restart.
func TestReloadFlagKeysNotRestartKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 0s\n"), 0o600)
	_, _, stderr := startServeLogged(t, freeAddr(t), "--verify-on-open", "--config", cfg)
	addToken(t, cfg, "carol")
	// Reloads run one after another: the second's message comes after
	// all the first one logs.
	for n := 1; n <= 2; n++ {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("reload %d is done", n), func() bool { return strings.Count(stderr.String(), "config reloaded") >= n })
	}
	if strings.Contains(stderr.String(), "take effect only after a restart") {
		t.Errorf("a reload that changed only actors: names keys to restart for: %s", stderr.String())
	}
}

// TestLocalTokenTwiceWithDataFlag: with serve --data, local.token is the
// flag's data dir's, and a config that lists its token_sha256 under
// actors: is refused, by a reload and at start, as it is without the
// flag: one token acts as one actor.
func TestLocalTokenTwiceWithDataFlag(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 0s\n"), 0o600)
	data := filepath.Join(dir, "flagged")
	_, stop, stderr := startServeLogged(t, freeAddr(t), "--data", data, "--config", cfg)
	h := localTokenHash(data)
	if h == "" {
		t.Fatal("serve made no local.token in --data's dir")
	}
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 0s\nactors:\n  - {id: mallory, token_sha256: "+h+"}\n"), 0o600)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload is done", func() bool {
		return strings.Contains(stderr.String(), "config reload") && strings.Contains(stderr.String(), "trigger=SIGHUP")
	})
	if !strings.Contains(stderr.String(), "one token acts as one actor") {
		t.Errorf("a reload listing local.token's hash under actors: was not refused: %s", stderr.String())
	}
	stop()

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &strings.Builder{}
	var mu sync.Mutex
	done := make(chan int, 1)
	go func() {
		w := lockedWriter{&mu, out}
		done <- run(ctx, []string{"serve", "--http", addr, "--data", data, "--config", cfg}, w, w)
	}()
	code := -1
	waitFor(t, "serve exits or serves", func() bool {
		select {
		case code = <-done:
			return true
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	if code < 0 { // it serves: stop it before its data dir is removed
		cancel()
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	if code <= 0 || !strings.Contains(out.String(), "one token acts as one actor") {
		t.Errorf("serve started with local.token's hash under actors: (exit %d): %s", code, out.String())
	}
}

// lockedWriter lets a test read what a serve it runs writes.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSIGHUPWithoutConfig: SIGHUP is how an operator asks for a reload;
// a sidecar started without --config has nothing to reload, and says so
// and serves on, rather than ending as the signal's default would.
func TestSIGHUPWithoutConfig(t *testing.T) {
	sp := startSidecarProc(t, "--data", filepath.Join(t.TempDir(), "d"))
	exited := make(chan struct{})
	proc := sp.cmd.Process
	go func() { proc.Wait(); close(exited) }()
	if err := proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	gone := false
	waitFor(t, "the sidecar answers SIGHUP", func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
			return strings.Contains(sp.stderr.String(), "msg=\"SIGHUP")
		}
	})
	if gone {
		t.Fatalf("SIGHUP ended the sidecar: %s", sp.stderr.String())
	}
	if !healthy(sp.base) {
		t.Fatalf("the sidecar stopped serving after SIGHUP: %s", sp.stderr.String())
	}
}

func healthy(base string) bool {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

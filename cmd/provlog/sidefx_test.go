package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// The side-effect test runs the real sidecar (serveChild, multi_test.go)
// and a real downstream with a side effect as processes: this test binary
// re-executed.
const (
	// sidefxEnv makes it an MCP server whose tool "append" appends its
	// "text" argument to the file this names; sidefxHTTPEnv, if set, is
	// the address it serves streamable HTTP on, else it serves stdio.
	sidefxEnv     = "PROVLOG_TEST_SIDEFX_FILE"
	sidefxHTTPEnv = "PROVLOG_TEST_SIDEFX_HTTP"
)

// sidefxChild runs the downstream role of the test binary if asked,
// reporting whether it did. TestMain asks first: the sidecar's children
// inherit serveChildEnv.
func sidefxChild() bool {
	if os.Getenv(sidefxEnv) == "" {
		return false
	}
	runSidefx(os.Getenv(sidefxEnv), os.Getenv(sidefxHTTPEnv))
	return true
}

// runSidefx is the downstream with a side effect: every call of "append"
// appends its text to file (and syncs it) before it answers, then sleeps
// sleep_ms, or holds the call until the file until_file exists. It reads
// no other argument, so it runs whatever the proxy forwards, arguments
// provlog cannot record included.
func runSidefx(file, addr string) {
	s := mcp.NewServer(&mcp.Implementation{Name: "sidefx", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"sleep_ms":{"type":"integer"},"until_file":{"type":"string"}}}`)
	s.AddTool(&mcp.Tool{Name: "append", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Text      string `json:"text"`
			SleepMS   int    `json:"sleep_ms"`
			UntilFile string `json:"until_file"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		f.WriteString(a.Text + "\n")
		f.Sync()
		f.Close()
		select {
		case <-time.After(time.Duration(a.SleepMS) * time.Millisecond):
		case <-ctx.Done():
		}
		for a.UntilFile != "" && ctx.Err() == nil {
			if _, err := os.Stat(a.UntilFile); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "appended " + a.Text}}}, nil
	})
	if addr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		if err := http.ListenAndServe(addr, h); err != nil {
			fmt.Fprintln(os.Stderr, "sidefx:", err)
			os.Exit(1)
		}
		return
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
}

// fxSidecar is a provlog serve process.
type fxSidecar struct {
	cmd    *exec.Cmd
	base   string
	stderr *proctest.Buffer
	done   chan error
}

func startFxSidecar(t *testing.T, args ...string) (*fxSidecar, error) {
	t.Helper()
	addr := freeAddr(t)
	sp := &fxSidecar{base: "http://" + addr, stderr: &proctest.Buffer{}, done: make(chan error, 1)}
	argv, _ := json.Marshal(append([]string{"serve", "--http", addr}, args...))
	sp.cmd = childCmd(t, serveChildEnv+"="+string(argv))
	sp.cmd.Stderr = sp.stderr
	if err := sp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { sp.done <- sp.cmd.Wait() }()
	if err := cmdtest.Healthy(sp.base, sp.done, sp.stderr); err != nil {
		select {
		case <-sp.done:
			// It ended: the caller decides (on a read-only data dir serve
			// may refuse to start).
			return nil, err
		default:
			sp.cmd.Process.Kill()
			t.Fatal(err)
		}
	}
	return sp, nil
}

// alive fails the test if the sidecar died.
func (sp *fxSidecar) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-sp.done:
		t.Fatalf("the sidecar died (%v): %s", err, sp.stderr.String())
	default:
	}
	resp, err := http.Get(sp.base + "/healthz")
	if err != nil {
		t.Fatalf("the sidecar does not answer /healthz: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("healthz: %d %s", resp.StatusCode, bytes.TrimSpace(b))
}

func (sp *fxSidecar) stop(t *testing.T) {
	t.Helper()
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sp.done:
	case <-time.After(20 * time.Second):
		sp.cmd.Process.Kill()
		<-sp.done
		t.Errorf("the sidecar did not stop on SIGTERM: %s", sp.stderr.String())
	}
}

func (sp *fxSidecar) kill() {
	sp.cmd.Process.Kill()
	<-sp.done
}

// mountTmpfs mounts a tmpfs of size at dir until the test ends.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("mounting a tmpfs needs root: %v %s", err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return p
		}
	}
}

// TestEverySideEffectIsRecorded runs provlog serve in front of a
// downstream whose tool appends its argument to a file, once over stdio
// and once over HTTP, and calls it through both fronts and both of the
// proxy's call paths, under arguments provlog cannot record, a full disk
// (a small tmpfs), a stopped log, a kill -9 in the middle of a call and a
// read-only data dir. Every side effect that happened must have its call
// entry in the log, the sidecar must never die of a fault, and a call cut
// off by the kill stays in the log without an outcome, which audit shows.
func TestEverySideEffectIsRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	mnt := t.TempDir()
	mountTmpfs(t, mnt, "64m")
	data := filepath.Join(mnt, "data")
	effects := t.TempDir() // off the small disk: side effects always happen
	stdioFile, httpFile := filepath.Join(effects, "stdio.txt"), filepath.Join(effects, "http.txt")
	exe, _ := os.Executable()

	httpAddr := freeAddr(t)
	down := exec.Command(exe, "-test.run=^$")
	down.Env = append(os.Environ(), sidefxEnv+"="+httpFile, sidefxHTTPEnv+"="+httpAddr)
	if err := down.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Process.Kill(); down.Wait() })

	const token = "sidefx-test-token"
	sum := sha256.Sum256([]byte(token))
	cfg := map[string]any{
		"data":   data,
		"actors": []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		"servers": []map[string]any{
			{"id": "fx", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: stdioFile}},
			// Redaction decodes the arguments: they are checked as strictly first.
			{"id": "fxh", "url": "http://" + httpAddr + "/mcp", "redact": []string{"password"}},
		},
	}
	cfgPath := filepath.Join(t.TempDir(), "provlog.yaml")
	cb, _ := json.Marshal(cfg) // JSON is YAML
	if err := os.WriteFile(cfgPath, cb, 0o600); err != nil {
		t.Fatal(err)
	}

	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// Both downstreams must be up before the scenario starts.
	waitTools(t, sp.base, token, []string{"fx__append", "fxh__append"})

	refused := map[string]bool{} // texts of calls whose arguments provlog cannot record
	calls := &callLog{t: t}
	connect := func() *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "sidefx-test", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: sp.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connecting: %v", err)
		}
		return cs
	}

	// Normal calls, refused encodings and a full disk, over HTTP: the
	// fast path (plain calls) and the SDK path (calls with a progress
	// token), to the stdio and the HTTP downstream.
	cs := connect()
	for _, phase := range []string{"normal", "encodings", "full", "stopped"} {
		switch phase {
		case "full":
			fill(t, mnt)
		case "stopped":
			os.Remove(filepath.Join(mnt, "filler")) // space again: the log stopped, until it resumes
		}
		// On the full disk, calls go on (with bigger arguments, past what
		// Pebble preallocated) until the log refuses them.
		rounds, pad := 6, 2000
		if phase == "full" {
			rounds, pad = 200, 30000
		}
		refusedBefore := calls.refusals()
		for i := range rounds {
			if phase == "full" && calls.refusals() > refusedBefore+8 {
				break
			}
			for _, tool := range []string{"fx__append", "fxh__append"} {
				for _, sdk := range []bool{false, true} {
					text := fmt.Sprintf("%s-%s-%d-sdk%v", phase, tool, i, sdk)
					args := json.RawMessage(fmt.Sprintf(`{"text":%q,"pad":%q}`, text, strings.Repeat("p", pad)))
					if phase == "encodings" {
						bad := []string{"1e999", "-1e400", strings.Repeat("9", 100000), `"\ud800"`, `1,"n":2`}[i%5]
						args = json.RawMessage(fmt.Sprintf(`{"text":%q,"n":%s}`, text, bad))
						refused[text] = true
					}
					calls.call(cs, tool, args, sdk, text)
				}
			}
		}
		// Once space is back the log resumes on its own (log/server
		// resume.go), so "stopped" may refuse some calls or none; what
		// holds either way is checked at the end: every side effect has
		// its call entry.
		if got := calls.refusals() - refusedBefore; phase != "stopped" && (phase == "normal") != (got == 0) {
			t.Errorf("phase %s: %d calls refused before forwarding", phase, got)
		}
		sp.alive(t)
	}
	cs.Close()
	sp.stop(t)

	// The stdio front, on the same data dir after a restart: the log
	// reopens at its last durable state.
	stdio := exec.Command(exe, "-test.run=^$")
	stdioArgs, _ := json.Marshal([]string{"serve", "--config", cfgPath})
	stdio.Env = append(os.Environ(), serveChildEnv+"="+string(stdioArgs))
	var stdioErr proctest.Buffer
	stdio.Stderr = &stdioErr
	scs, err := mcp.NewClient(&mcp.Implementation{Name: "sidefx-stdio", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatalf("stdio sidecar: %v %s", err, stdioErr.String())
	}
	waitSessionTools(t, scs, []string{"fx__append", "fxh__append"})
	for i := range 3 {
		for _, tool := range []string{"fx__append", "fxh__append"} {
			text := fmt.Sprintf("stdio-%s-%d", tool, i)
			calls.call(scs, tool, json.RawMessage(fmt.Sprintf(`{"text":%q}`, text)), false, text)
			text = fmt.Sprintf("stdio-enc-%s-%d", tool, i)
			refused[text] = true
			calls.call(scs, tool, json.RawMessage(fmt.Sprintf(`{"text":%q,"n":1e999}`, text)), false, text)
		}
	}
	scs.Close()

	// kill -9 in the middle of a call: its call entry stays, without an
	// outcome.
	sp, err = startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	waitTools(t, sp.base, token, []string{"fx__append"})
	cs = connect()
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__append", Arguments: json.RawMessage(`{"text":"killed-mid-call","sleep_ms":30000}`)})
	for deadline := time.Now().Add(20 * time.Second); !fileHas(stdioFile, "killed-mid-call"); {
		if time.Now().After(deadline) {
			t.Fatal("the call before the kill did not reach the downstream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sp.kill()

	// A read-only data dir: the sidecar refuses to start, or serves and
	// refuses calls; either way no call goes unrecorded.
	if out, err := exec.Command("mount", "--bind", data, data).CombinedOutput(); err != nil {
		t.Fatalf("bind mount: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", data).CombinedOutput(); err != nil {
		exec.Command("umount", data).Run()
		t.Fatalf("read-only remount: %v %s", err, out)
	}
	sp, err = startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Logf("on a read-only data dir: %v", err)
	} else {
		cs = connect()
		for i := range 3 {
			text := fmt.Sprintf("readonly-%d", i)
			calls.call(cs, "fx__append", json.RawMessage(fmt.Sprintf(`{"text":%q}`, text)), false, text)
		}
		cs.Close()
		sp.alive(t)
		sp.stop(t)
	}
	if out, err := exec.Command("umount", data).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}

	// Every side effect has its call entry.
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := s.Entries(context.Background(), 0, st.Size)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]uint64{} // text -> call entry index
	for i, b := range entries {
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != log.KindCall {
			continue
		}
		c, err := log.ParseCall(e)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Text string `json:"text"`
		}
		json.Unmarshal(c.Args, &a)
		recorded[a.Text] = uint64(i)
	}
	effectsSeen := 0
	for _, f := range []string{stdioFile, httpFile} {
		for _, line := range readLines(t, f) {
			effectsSeen++
			if _, ok := recorded[line]; !ok {
				t.Errorf("side effect %q happened without a call entry", line)
			}
			if refused[line] {
				t.Errorf("a call provlog could not record reached the downstream: %q", line)
			}
		}
	}
	t.Logf("%d side effects, %d call entries; outcomes seen by the client: %s", effectsSeen, len(recorded), calls.summary())
	if calls.ok == 0 || calls.refused == 0 {
		t.Errorf("the scenario did not exercise both outcomes: %s", calls.summary())
	}

	// audit passes and names the call cut off by the kill.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"audit", "--data", data}, &out, &errb); code != 0 {
		t.Fatalf("audit: exit %d: %s %s", code, out.String(), errb.String())
	}
	killed, ok := recorded["killed-mid-call"]
	if !ok {
		t.Fatal("the call cut off by the kill has no call entry")
	}
	if !strings.Contains(out.String(), "without a recorded outcome") || !strings.Contains(out.String(), fmt.Sprint(killed)) {
		t.Errorf("audit does not show call %d without an outcome:\n%s", killed, out.String())
	}
	t.Logf("audit:\n%s", out.String())

	// provlog tasks and the export bundle show it too.
	out.Reset()
	if code := run(context.Background(), []string{"tasks", "--data", data, "list"}, &out, &errb); code != 0 {
		t.Fatalf("tasks: exit %d: %s %s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "no recorded outcome") || !strings.Contains(out.String(), fmt.Sprint(killed)) {
		t.Errorf("tasks list does not show call %d without an outcome:\n%s", killed, out.String())
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	if code := run(context.Background(), []string{"export", "--data", data, "--out", bundle}, &out, &errb); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errb.String())
	}
	if code := run(context.Background(), []string{"verify-bundle", bundle}, &out, &errb); code != 0 {
		t.Fatalf("verify-bundle: exit %d: %s", code, errb.String())
	}
	prov, err := os.ReadFile(filepath.Join(bundle, "provenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"log:entry/%d/no-outcome"`, killed); !bytes.Contains(prov, []byte(want)) {
		t.Errorf("the PROV document does not mark call %d as without an outcome (%s)", killed, want)
	}
}

// callLog makes calls and counts how they ended.
type callLog struct {
	t           *testing.T
	mu          sync.Mutex
	ok, refused int
	failed      []string
}

func (l *callLog) call(cs *mcp.ClientSession, tool string, args json.RawMessage, sdkPath bool, text string) {
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if sdkPath {
		params.SetProgressToken(text) // a progress token keeps the call off the fast path
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil && !res.IsError:
		l.ok++
	case err != nil && strings.Contains(err.Error(), "was not made"):
		l.refused++
	default:
		msg := fmt.Sprint(err)
		if err == nil {
			msg = "tool error"
		}
		l.failed = append(l.failed, text+": "+msg)
	}
}

func (l *callLog) refusals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

func (l *callLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d answered, %d refused before forwarding, %d failed otherwise", l.ok, l.refused, len(l.failed))
	for i, f := range l.failed {
		if i == 3 {
			s += fmt.Sprintf("; … %d more", len(l.failed)-3)
			break
		}
		s += "; " + f
	}
	return s
}

// waitTools waits until the sidecar at base lists the tools.
func waitTools(t *testing.T, base, token string, tools []string) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "wait", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	waitSessionTools(t, cs, tools)
}

func waitSessionTools(t *testing.T, cs *mcp.ClientSession, tools []string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := cs.ListTools(context.Background(), nil)
		have := map[string]bool{}
		if err == nil {
			for _, tl := range res.Tools {
				have[tl.Name] = true
			}
		}
		all := true
		for _, n := range tools {
			all = all && have[n]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools %v not listed (have %v, %v)", tools, have, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fileHas(path, line string) bool {
	b, _ := os.ReadFile(path)
	return bytes.Contains(b, []byte(line+"\n"))
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigErrorShowsNoValue: a config whose secret sits where YAML
// wants another type (a header's value written as the whole headers:,
// an env: written as a string) is refused at start, by token add and by
// a reload, saying where and what type was wanted, without the value or
// its first characters: yaml.v3 quotes a value of up to 10 characters
// whole and a longer one's first 7.
func TestConfigErrorShowsNoValue(t *testing.T) {
	const short, long = "hunter2pw", "sk-live-0123456789abcdef"
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	bad := fmt.Sprintf("data: %s\nservers:\n  - id: a\n    url: http://127.0.0.1:1/mcp\n    headers: %q\n  - id: b\n    command: [x]\n    env: %q\n", data, short, long)
	shows := func(what, out string) {
		t.Helper()
		if strings.Contains(out, short) || strings.Contains(out, long[:7]) {
			t.Errorf("%s shows a config value: %s", what, out)
		}
		if !strings.Contains(out, "line ") || !strings.Contains(out, "map") {
			t.Errorf("%s does not say where and what was wanted: %s", what, out)
		}
	}
	cfg := writeFile(t, filepath.Join(dir, "bad.yaml"), []byte(bad))
	out, rc := runCmd(t, "serve", "--config", cfg, "--http", freeAddr(t))
	if rc == 0 {
		t.Fatal("serve started with a config that does not load")
	}
	shows("serve", out)
	out, rc = runCmd(t, "token", "add", "--config", cfg, "--actor", "alice")
	if rc == 0 {
		t.Fatal("token add edited a config that does not load")
	}
	shows("token add", out)

	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, fmt.Appendf(nil, "data: %s\nreload_interval: 50ms\n", data))
	_, _, stderr := startServeLogged(t, freeAddr(t), "--config", good)
	writeFile(t, good, []byte(strings.Replace(bad, "data:", "reload_interval: 50ms\ndata:", 1)))
	for i := 0; !strings.Contains(stderr.String(), "config reload failed"); i++ {
		if i == 1000 {
			t.Fatalf("the sidecar never reported the bad config: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	shows("a reload", stderr.String())
}

package log_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces DESIGN §1: only log/logpebble imports Pebble,
// the log package stays pure (no net/http, no Pebble, no logging, only the
// standard library, merkle and x/mod's note), and no product package
// imports tools/.
func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", "github.com/provlog/provlog/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Deps       []string
		Standard   bool
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 3 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	const mod = "github.com/provlog/provlog"
	isStd := func(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && p.ImportPath != mod+"/log/logpebble" {
				t.Errorf("%s imports %s: only log/logpebble may import Pebble", p.ImportPath, imp)
			}
			if strings.HasPrefix(imp, mod+"/tools") {
				t.Errorf("%s imports %s: tools are never imported by product code", p.ImportPath, imp)
			}
		}
		if p.ImportPath != mod+"/log" {
			continue
		}
		for _, imp := range p.Imports {
			ok := isStd(imp) || strings.HasPrefix(imp, "github.com/transparency-dev/merkle") || imp == "golang.org/x/mod/sumdb/note"
			if !ok {
				t.Errorf("log imports %s: it may import only the standard library, merkle and x/mod/sumdb/note", imp)
			}
		}
		for _, d := range p.Deps {
			switch {
			case d == "net/http", d == "log", d == "log/slog", strings.HasPrefix(d, "github.com/cockroachdb/"), d == "os/exec":
				t.Errorf("log depends on %s: it must stay pure (no net/http, no Pebble, no logging)", d)
			}
		}
	}
}

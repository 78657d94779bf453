package log_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/provlog/provlog"

// listed is one package as go list -json describes it.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listAll returns every package of the module and every package they
// depend on, by import path.
func listAll(t *testing.T) map[string]*listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string]*listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		p := &listed{}
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		all[p.ImportPath] = p
	}
	if len(all) < 10 {
		t.Fatalf("go list found only %d packages", len(all))
	}
	return all
}

// under reports whether path is the module's package dir or one below it.
func under(path, dir string) bool {
	return path == mod+"/"+dir || strings.HasPrefix(path, mod+"/"+dir+"/")
}

// testHelper reports whether a package exists only for tests (logtest,
// anchortest/..., witnesstest, proxy/internal/testproxy): those may
// reach across the tree; product code never imports them.
func testHelper(path string) bool {
	for _, el := range strings.Split(strings.TrimPrefix(path, mod+"/"), "/") {
		if strings.HasSuffix(el, "test") || strings.HasPrefix(el, "test") {
			return true
		}
	}
	return false
}

// mayImport is DESIGN §1's table for the module's own packages: a package
// under the key's folder may import module packages only under the listed
// folders (its own folder always). cmd may import everything but tools.
var mayImport = map[string][]string{
	"log":     {"log"},
	"witness": {"log", "witness"},
	"anchor":  {"log", "anchor"},
	"opp":     {"log", "opp"},
	"proxy":   {"log", "opp", "proxy"},
	"cmd":     {"log", "witness", "anchor", "opp", "proxy", "cmd"},
	"tools":   {"log", "witness", "anchor", "opp", "proxy", "tools"},
}

// TestImportRules enforces DESIGN §1's table: arrows point down (nothing
// under log/ imports anchor, witness, opp, proxy or cmd; proxy reaches no
// further than log and opp), only the Pebble stores import Pebble, no
// product package imports tools/ or a test helper, and package log stays
// pure.
func TestImportRules(t *testing.T) {
	all := listAll(t)
	for _, p := range all {
		if !strings.HasPrefix(p.ImportPath, mod+"/") {
			continue
		}
		top := strings.SplitN(strings.TrimPrefix(p.ImportPath, mod+"/"), "/", 2)[0]
		allowed, ok := mayImport[top]
		if !ok {
			t.Errorf("%s: top-level folder %q is not in DESIGN §1 (cmd log witness anchor proxy opp tools)", p.ImportPath, top)
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && !pebbleStore(p.ImportPath) {
				t.Errorf("%s imports %s: only log/logpebble, its guard log/pebbleguard and the witness's store witness/witnesspebble may import Pebble", p.ImportPath, imp)
			}
			if strings.HasPrefix(imp, "github.com/jackc/pgx") && p.ImportPath != mod+"/log/logpg" {
				t.Errorf("%s imports %s: only log/logpg may import pgx", p.ImportPath, imp)
			}
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			if under(imp, "tools") && top != "tools" {
				t.Errorf("%s imports %s: tools are never imported by product code", p.ImportPath, imp)
				continue
			}
			if testHelper(p.ImportPath) {
				continue // a test helper may reach any product package
			}
			if testHelper(imp) && top != "tools" {
				t.Errorf("%s imports the test helper %s", p.ImportPath, imp)
			}
			if !slices.ContainsFunc(allowed, func(dir string) bool { return under(imp, dir) }) {
				t.Errorf("%s imports %s: an arrow up (DESIGN §1: %s may import only %v)", p.ImportPath, imp, top, allowed)
			}
			if top == "proxy" && under(imp, "log") && imp != mod+"/log" {
				t.Errorf("%s imports %s: proxy reaches the log only through package log and its own narrow interfaces", p.ImportPath, imp)
			}
		}
	}
	checkPureLog(t, all[mod+"/log"])
}

func pebbleStore(path string) bool {
	return path == mod+"/log/logpebble" || path == mod+"/log/pebbleguard" || path == mod+"/witness/witnesspebble"
}

// checkPureLog holds package log to the standard library, merkle and
// x/mod's note, with no I/O or logging in its dependencies.
func checkPureLog(t *testing.T, p *listed) {
	if p == nil {
		t.Fatal("go list did not list package log")
	}
	for _, imp := range p.Imports {
		if !isStd(imp) && !strings.HasPrefix(imp, "github.com/transparency-dev/merkle") && imp != "golang.org/x/mod/sumdb/note" {
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

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// TestLogDependencyBudget holds everything under log/ to a regulator's
// verifier's budget: the standard library, merkle and x/mod, plus what
// Pebble brings to log/logpebble and its guard log/pebbleguard and pgx to
// log/logpg. Nothing under log/ depends on sigstore, go-openapi, OpenTelemetry or protobuf except where
// Pebble itself brings it (cockroachdb/errors uses gogo protobuf).
func TestLogDependencyBudget(t *testing.T) {
	all := listAll(t)
	base := []string{"github.com/transparency-dev/merkle", "golang.org/x/mod"}
	forbidden := []string{"github.com/sigstore/", "github.com/go-openapi/", "go.opentelemetry.io/", "google.golang.org/protobuf", "github.com/gogo/protobuf", "github.com/golang/protobuf"}
	for _, p := range all {
		if !under(p.ImportPath, "log") {
			continue
		}
		// What a store's database driver brings is allowed to that store.
		brought := map[string]bool{}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && pebbleStore(p.ImportPath) ||
				strings.HasPrefix(imp, "github.com/jackc/pgx") && p.ImportPath == mod+"/log/logpg" {
				brought[imp] = true
				for _, d := range all[imp].Deps {
					brought[d] = true
				}
			}
		}
		var heavy, other []string
		for _, d := range p.Deps {
			switch {
			case isStd(d) || under(d, "log") || brought[d]:
			case slices.ContainsFunc(forbidden, func(f string) bool { return strings.HasPrefix(d, f) }):
				heavy = append(heavy, d)
			case !slices.ContainsFunc(base, func(b string) bool { return d == b || strings.HasPrefix(d, b+"/") }):
				other = append(other, d)
			}
		}
		if len(heavy) > 0 {
			t.Errorf("%s depends on %d packages of sigstore, go-openapi, OpenTelemetry or protobuf (%s, ...): log/... stays free of them", p.ImportPath, len(heavy), heavy[0])
		}
		if len(other) > 0 {
			t.Errorf("%s depends on %v: log/... may depend only on the standard library, merkle and x/mod (and its store's driver)", p.ImportPath, other)
		}
		for d := range brought {
			for _, f := range forbidden[:3] {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s: its driver brings %s", p.ImportPath, d)
				}
			}
		}
	}
}

package log_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The house's size limits (STYLE, issue 17): a product file stays within
// maxFileLines lines and a function within maxFuncLines, so that a
// newcomer can read either in one sitting.
const (
	maxFileLines = 700
	maxFuncLines = 100
)

// productFiles returns the module's non-test Go files, by path from the
// module root: everything but _test.go files, testdata and other modules
// nested in the tree (tools/bench has its own go.mod).
func productFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d Go files under %s", len(files), root)
	}
	return files
}

// TestSizeLimits holds every product file to maxFileLines lines and every
// function (a declared function or method, the literals inside it
// included) to maxFuncLines lines, from its func keyword to its closing
// brace.
func TestSizeLimits(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	for _, path := range productFiles(t, root) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
			t.Errorf("%s is %d lines: a product file stays within %d (split it by what it holds)", rel, n, maxFileLines)
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines: a function stays within %d (split it into named steps)", rel, start.Line, fn.Name.Name, n, maxFuncLines)
			}
		}
	}
}

// TestReadmeLayout holds the README's Layout paragraph to the tree: it
// names, in backquotes, every Go package folder of the module and every
// folder under tools/ (a nested module by its own folder only), and every
// path it names is in the tree.
func TestReadmeLayout(t *testing.T) {
	root := ".."
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(readme), "\nLayout (")
	if !ok {
		t.Fatal(`README.md has no paragraph starting "Layout ("`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	named := map[string]bool{}
	for i, s := range strings.Split(strings.ReplaceAll(para, "\n", " "), "`") {
		if i%2 == 1 {
			named[s] = true
		}
	}
	// The folders that must be named: each holding Go files (not tests
	// only), each folder of tools/, and a nested module's own folder.
	want := map[string]bool{}
	for _, path := range productFiles(t, root) {
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if rel != "." {
			want[filepath.ToSlash(rel)] = true
		}
	}
	tools, err := os.ReadDir(filepath.Join(root, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range tools {
		if d.IsDir() {
			want["tools/"+d.Name()] = true
		}
	}
	for dir := range want {
		if !named[dir] {
			t.Errorf("README's Layout does not name %s: say in a few words what it holds", dir)
		}
	}
	for n := range named {
		top, _, _ := strings.Cut(n, "/")
		switch top {
		case "log", "anchor", "witness", "opp", "proxy", "cmd", "tools":
		default:
			continue // not a folder name (testdata/script is each command's)
		}
		if _, err := os.Stat(filepath.Join(root, n)); err != nil {
			t.Errorf("README's Layout names %s, which is not in the tree", n)
		}
	}
}

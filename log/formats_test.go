package log_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestEntryKindsDocumented holds docs/formats.md's table of entry kinds to
// the code. An auditor reading a log offline has only the docs to learn
// what a kind means, and CI has only this repository (not the shared
// DESIGN.md), so the table must name every kind the code can write: each
// Kind… string constant and each string literal given as an entry's kind.
// A kind constant that names no entry kind is said so under the table
// ("Other kind constants…"). And no row may name a kind the code no
// longer has.
func TestEntryKindsDocumented(t *testing.T) {
	root := ".."
	code := codeKinds(t, root)
	if len(code) < 10 {
		t.Fatalf("found only %d entry kinds in the code; the scan is broken: %v", len(code), code)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "formats.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, others := docKinds(t, string(doc))
	for kind, where := range code {
		if !rows[kind] && !others[kind] {
			t.Errorf("entry kind %q (%s) is not in docs/formats.md's table of entry kinds: add a row with its fields' owner", kind, where)
		}
	}
	for kind := range rows {
		if _, ok := code[kind]; !ok {
			t.Errorf("docs/formats.md's table names entry kind %q, which the code does not define", kind)
		}
	}
}

// codeKinds returns the kinds the product code defines, each with where
// it was found: the values of string constants named Kind…, and string
// literals set as the Kind of a composite literal of a type named …Entry
// or passed first to NewEntry.
func codeKinds(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range productFiles(t, root) {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		add := func(lit ast.Expr, what string) {
			b, ok := lit.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return
			}
			v, err := strconv.Unquote(b.Value)
			if err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
			if _, seen := out[v]; !seen {
				out[v] = rel + " " + what
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, s := range n.Specs {
					vs := s.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if strings.HasPrefix(name.Name, "Kind") && i < len(vs.Values) {
							add(vs.Values[i], name.Name)
						}
					}
				}
			case *ast.CompositeLit:
				if !strings.HasSuffix(typeName(n.Type), "Entry") {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Kind" {
							add(kv.Value, typeName(n.Type)+"{Kind: …}")
						}
					}
				}
			case *ast.CallExpr:
				if typeName(n.Fun) == "NewEntry" && len(n.Args) > 0 {
					add(n.Args[0], "NewEntry(…)")
				}
			}
			return true
		})
	}
	return out
}

// typeName returns the last name of a type or function expression: Entry
// for log.Entry and Entry alike.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// docKinds reads the section "## Entry kinds" of formats.md: the kinds
// its table's rows start with, and those the paragraph beginning "Other
// kind constants" names in backquotes.
func docKinds(t *testing.T, doc string) (rows, others map[string]bool) {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n## Entry kinds\n")
	if !ok {
		t.Fatal(`docs/formats.md has no section "## Entry kinds"`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	rows, others = map[string]bool{}, map[string]bool{}
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	quoted := regexp.MustCompile("`([^`]+)`")
	for _, para := range strings.Split(sec, "\n\n") {
		if strings.HasPrefix(para, "Other kind constants") {
			for _, m := range quoted.FindAllStringSubmatch(para, -1) {
				others[m[1]] = true
			}
			continue
		}
		for _, line := range strings.Split(para, "\n") {
			if m := row.FindStringSubmatch(line); m != nil {
				if rows[m[1]] {
					t.Errorf("docs/formats.md's table has two rows for %q", m[1])
				}
				rows[m[1]] = true
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/formats.md's section Entry kinds has no table rows")
	}
	return rows, others
}

// TestEntryKindsShown: the auditor's page says in words what each entry
// kind in docs/formats.md's table is (entry.js's kindWords); a kind it
// lacks was shown as "another kind", as purge and replay were.
func TestEntryKindsShown(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "formats.md"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join("server", "ui", "static", "entry.js"))
	if err != nil {
		t.Fatal(err)
	}
	_, words, ok := strings.Cut(string(js), "const kindWords = {\n")
	if words, _, ok = strings.Cut(words, "\n};"); !ok {
		t.Fatal("entry.js has no kindWords object")
	}
	shown := map[string]bool{}
	key := regexp.MustCompile(`^\s*"?([a-z.]+)"?:`)
	for _, line := range strings.Split(words, "\n") {
		if m := key.FindStringSubmatch(line); m != nil {
			shown[m[1]] = true
		}
	}
	rows, _ := docKinds(t, string(doc))
	for kind := range rows {
		if !shown[kind] {
			t.Errorf("entry kind %q has no words in entry.js's kindWords: the page calls it \"another kind\"", kind)
		}
	}
}

//go:build unix

package bundle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log/bundle"
)

// editManifest rewrites dir's manifest through edit.
func editManifest(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, bundle.ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile puts what make makes in place of the bundle file name.
func replaceFile(t *testing.T, dir, name string, make func(p string) error) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := make(p); err != nil {
		t.Fatal(err)
	}
}

// TestHostileFiles hands Verify bundles whose files are not what a
// bundle's files are: each must fail, naming the file and what is wrong,
// without waiting on a named pipe, reading a device without end, or
// reading a file outside the bundle; and a manifest may claim nothing the
// other files do not give.
func TestHostileFiles(t *testing.T) {
	f := newFixture(t, 3, true)
	src := f.export(t, 0, 0)
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"a record": "from elsewhere"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		tamper    func(t *testing.T, dir string)
		part, msg string
	}{
		{"named pipe", func(t *testing.T, dir string) {
			replaceFile(t, dir, bundle.TreeFile, func(p string) error { return syscall.Mkfifo(p, 0o644) })
		}, bundle.TreeFile, "is not a regular file (a named pipe)"},
		{"link to a device", func(t *testing.T, dir string) {
			replaceFile(t, dir, bundle.CheckpointFile, func(p string) error { return os.Symlink("/dev/zero", p) })
		}, bundle.CheckpointFile, "is not a regular file (a symbolic link)"},
		{"link outside", func(t *testing.T, dir string) {
			replaceFile(t, dir, bundle.EntriesFile, func(p string) error { return os.Symlink(outside, p) })
		}, bundle.EntriesFile, "is not a regular file (a symbolic link)"},
		{"unlisted link", func(t *testing.T, dir string) {
			os.Symlink(outside, filepath.Join(dir, "extra.json"))
		}, "extra.json", "is not a regular file (a symbolic link)"},
		{"path out of the bundle", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(outside)
			rel, _ := filepath.Rel(filepath.Join(dir, "anchors"), outside)
			editManifest(t, dir, func(m map[string]any) {
				m["files"].(map[string]any)["anchors/"+filepath.ToSlash(rel)] = sha256hex(b)
			})
		}, bundle.ManifestFile, "which is not a path inside the bundle"},
		{"huge file", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, bundle.TreeFile), 17<<20)
		}, bundle.TreeFile, "is 17825792 bytes, over the 16777216"},
		{"second manifest", func(t *testing.T, dir string) {
			fh, _ := os.OpenFile(filepath.Join(dir, bundle.ManifestFile), os.O_APPEND|os.O_WRONLY, 0)
			fh.WriteString(`{"from": 1}`)
			fh.Close()
		}, bundle.ManifestFile, "holds more than one JSON object"},
		{"member twice", func(t *testing.T, dir string) {
			p := filepath.Join(dir, bundle.ManifestFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append([]byte(`{"from": 2,`), bytes.TrimPrefix(bytes.TrimSpace(b), []byte("{"))...), 0o644)
		}, bundle.ManifestFile, `is not strict JSON: jcs: duplicate key "from"`},
		{"member in another case", func(t *testing.T, dir string) {
			// encoding/json took "FROM" for "from" (the last of the two
			// winning), where the page and other readers take "from".
			p := filepath.Join(dir, bundle.ManifestFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append([]byte(`{"FROM": 2,`), bytes.TrimPrefix(bytes.TrimSpace(b), []byte("{"))...), 0o644)
		}, bundle.ManifestFile, `member "FROM" of the object is named "from" (names are case-sensitive)`},
		{"listed file nothing checks", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "README.txt"), []byte("certified\n"), 0o644)
			editManifest(t, dir, func(m map[string]any) { m["files"].(map[string]any)["README.txt"] = strings.Repeat("00", 32) })
		}, "README.txt", "is listed in manifest.json but is not a file of a bundle"},
		{"cosigned without witnesses", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, bundle.WitnessesFile))
			editManifest(t, dir, func(m map[string]any) { delete(m["files"].(map[string]any), bundle.WitnessesFile) })
		}, bundle.ManifestFile, "says cosigned true, but the bundle has no witnesses.txt"},
		{"a witness twice", func(t *testing.T, dir string) {
			p := filepath.Join(dir, bundle.WitnessesFile)
			b, _ := os.ReadFile(p)
			_, key, _ := bytes.Cut(b, []byte("\n"))
			b = append(b, key...)
			os.WriteFile(p, b, 0o644)
			editManifest(t, dir, func(m map[string]any) { m["files"].(map[string]any)[bundle.WitnessesFile] = sha256hex(b) })
		}, bundle.WitnessesFile, "witness policy: witness witness.test/w1+"},
		{"trust not the files'", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["trust"] = "records" })
		}, bundle.ManifestFile, `says trust "records", but the bundle has 1 anchor records and trust roots`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, src)
			tc.tamper(t, dir)
			_, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
			var ve *bundle.VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify: %v; want problems", err)
			}
			// One problem with the part: the first says what is wrong,
			// a second one would only be its echo.
			var of []string
			for _, p := range ve.Problems {
				if p.Part == tc.part {
					of = append(of, p.Msg)
				}
			}
			if len(of) != 1 || !strings.Contains(of[0], tc.msg) {
				t.Errorf("Verify: %v; want one problem with %s: %q", err, tc.part, tc.msg)
			}
		})
	}
}

// TestExportFileModes: every file of a bundle exported under a umask of
// 000 (a service's, or a container's) is written as the manifest is,
// 0644: readable by its auditors, writable by its owner alone. The
// entries and the PROV document were made with os.Create's 0666, writable
// by anyone on the machine.
func TestExportFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	f := newFixture(t, 5, true)
	dir := f.export(t, 0, 0)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", p[len(dir):], fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

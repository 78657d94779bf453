package durable

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, data := range []string{"one", "two, longer"} {
		if err := WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("after WriteFile(%q): %q, %v", data, got, err)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 whatever the umask", fi.Mode().Perm())
	}
	assertOnly(t, dir, "f")
}

func TestCreateFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := CreateFile(p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	err := CreateFile(p, []byte("other"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("second CreateFile: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "secret" {
		t.Errorf("CreateFile replaced the file: %q", got)
	}
	assertOnly(t, dir, "key")
}

// TestFailureLeavesNothing: a write that cannot finish (the directory is
// gone) fails and leaves no temporary file behind.
func TestFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A directory in the way: the rename fails after the temp was written.
	if err := WriteFile(filepath.Join(dir, "d"), []byte("x"), 0o600); err == nil {
		t.Error("WriteFile over a directory succeeded")
	}
	assertOnly(t, dir, "d")
}

// TestWriteFileFuncFailure: a write function that fails leaves the old
// file as it was and no temporary file; one that succeeds replaces it.
func TestWriteFileFuncFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFileFunc(path, 0o600, func(w io.Writer) error {
		io.WriteString(w, "half of the new")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFileFunc = %v, want the write's error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("after a failed write the file holds %q, want the old bytes", b)
	}
	assertOnly(t, dir, "f")
	if err := WriteFileFunc(path, 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("the file holds %q, want new", b)
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("directory holds %v, want only %v (no temporary files left)", got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("directory holds %v, want only %v", got, names)
		}
	}
}

package blobs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestPutGetPurge(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("result "), 20000)
	sum, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if sum != Sum(data) {
		t.Fatalf("Put returned %s, want %s", sum, Sum(data))
	}
	if again, err := s.Put(data); err != nil || again != sum {
		t.Fatalf("second Put = %s, %v", again, err)
	}
	got, err := s.Get(sum)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes, %v", len(got), err)
	}
	if err := s.Purge(sum); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(sum); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Purge: %v, want ErrNotFound", err)
	}
	if err := s.Purge(sum); err != nil {
		t.Fatalf("second Purge: %v", err)
	}
}

func TestCorruptBlobIsReported(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	sum, err := s.Put([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sum[:2], sum), []byte("hellO"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(sum); err == nil {
		t.Fatal("Get of a changed blob succeeded")
	}
}

func TestBadNames(t *testing.T) {
	s, _ := Open(t.TempDir())
	for _, name := range []string{"", "zz", "../../etc/passwd", Sum(nil)[:63], "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"} {
		if _, err := s.Get(name); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want a bad-name error", name, err)
		}
		if err := s.Purge(name); err == nil {
			t.Errorf("Purge(%q) succeeded", name)
		}
	}
}

// TestPurgeAbsent: purging a blob never stored, in a fresh store whose
// subdirectory for it does not exist, is not an error.
func TestPurgeAbsent(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(Sum([]byte("never stored"))); err != nil {
		t.Fatal(err)
	}
}

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

// TestErrIsTheLastPuts: Err is the last Put's error, and nil again once a
// Put succeeds.
func TestErrIsTheLastPuts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Fatalf("a new store's Err: %v", s.Err())
	}
	os.RemoveAll(dir)
	os.WriteFile(dir, []byte("not a directory"), 0o600)
	if _, err := s.Put([]byte("x")); err == nil || s.Err() == nil || s.Err().Error() != err.Error() {
		t.Fatalf("Put into a file: %v; Err %v", err, s.Err())
	}
	os.Remove(dir)
	os.Mkdir(dir, 0o700)
	if _, err := s.Put([]byte("x")); err != nil || s.Err() != nil {
		t.Fatalf("Put after the directory is back: %v; Err %v", err, s.Err())
	}
}

// TestHasTellsErrorsFromAbsence: a blob the store cannot look up (here its
// subdirectory is a file: an I/O error, not absence) is neither there nor
// absent. Before, Has said false, and retention took the blob for purged.
func TestHasTellsErrorsFromAbsence(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Put([]byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Has(sum); !ok || err != nil {
		t.Fatalf("Has of a blob put: %v, %v", ok, err)
	}
	if ok, err := s.Has(Sum([]byte("never put"))); ok || err != nil {
		t.Fatalf("Has of a blob never put: %v, %v", ok, err)
	}
	sub := filepath.Join(dir, sum[:2])
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Has(sum); ok || err == nil {
		t.Fatalf("Has where the store cannot look: %v, %v; want an error", ok, err)
	}
}

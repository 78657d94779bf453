// Package blobs is the content-addressed store beside a log for values too
// large for an entry: big tool arguments and retained results. An entry
// keeps a blob's SHA-256; the blob itself can be purged (retention,
// erasure requests) without breaking any proof, because no leaf hash
// covers the blob's bytes.
package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/provlog/provlog/log/durable"
)

// ErrNotFound is returned for a blob the store does not hold, whether it
// was never put or has been purged.
var ErrNotFound = errors.New("blob not found")

// A Store keeps blobs as files named by their hex SHA-256, in 256
// subdirectories named by the first two hex digits.
type Store struct {
	dir string
}

// Open opens (creating if needed) a blob store in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening blob store: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Sum returns the hex SHA-256 by which a blob is named.
func Sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

func (s *Store) path(sum string) (string, error) {
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != sum {
		return "", fmt.Errorf("blob name %q is not a lowercase hex SHA-256", sum)
	}
	return filepath.Join(s.dir, sum[:2], sum), nil
}

// Put stores data durably and returns its name. Putting the same bytes
// again is a no-op.
func (s *Store) Put(data []byte) (string, error) {
	sum := Sum(data)
	p, _ := s.path(sum)
	if _, err := os.Stat(p); err == nil {
		return sum, nil
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("storing blob: %w", err)
	}
	if err := durable.WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("storing blob: %w", err)
	}
	return sum, nil
}

// Get returns the blob named sum, after checking that its bytes still
// hash to sum.
func (s *Store) Get(sum string) ([]byte, error) {
	p, err := s.path(sum)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(b); !bytes.Equal(got[:], mustHex(sum)) {
		return nil, fmt.Errorf("blob %s is corrupt: its bytes hash to %x", sum, got)
	}
	return b, nil
}

// Purge deletes the blob named sum. Purging a blob that is absent is not
// an error.
func (s *Store) Purge(sum string) error {
	p, err := s.path(sum)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("purging blob: %w", err)
	}
	return durable.SyncDir(filepath.Dir(p))
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// Has reports whether the store holds a blob named sum (without reading
// or checking it).
func (s *Store) Has(sum string) bool {
	p, err := s.path(sum)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

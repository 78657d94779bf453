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
	"sync/atomic"

	"github.com/provlog/provlog/log/durable"
)

// ErrNotFound is returned for a blob the store does not hold, whether it
// was never put or has been purged.
var ErrNotFound = errors.New("blob not found")

// A Store keeps blobs by their hex SHA-256 in a [Backend]: files in a
// directory ([Open]), or the table of a shared log's database (logpg), so
// that every sidecar of one log reads the blobs any of them wrote and a
// purge through one removes them for all.
type Store struct {
	b      Backend
	failed atomic.Pointer[error] // the last Put's error, nil if it succeeded (Err)
	holds  holds                 // the blobs entries on their way name, and those a purge deletes (hold.go)
}

// ErrHeld is returned (wrapped) by a Backend's WriteBlob for a name it
// holds already: it wrote nothing.
var ErrHeld = errors.New("blob held already")

// A Backend holds a Store's bytes by name (a lowercase hex SHA-256, checked
// by the Store). ReadBlob returns an error wrapping [ErrNotFound] for a name
// it does not hold; WriteBlob is durable when it returns and leaves a name
// already held as it is, saying so ([ErrHeld]) or, if it checked the bytes
// held are these, with no error; DeleteBlob of an absent name is not an
// error.
type Backend interface {
	ReadBlob(name string) ([]byte, error)
	WriteBlob(name string, data []byte) error
	DeleteBlob(name string) error
	HasBlob(name string) (bool, error)
}

// New returns a Store over b.
func New(b Backend) *Store { return &Store{b: b} }

// Shared reports whether other processes write and delete the store's
// blobs too (a shared log's table): its backend says so with a method
// Shared() bool. Holds ([Store.Hold]) are one Store's, so a writer must
// not take a blob it wrote, and no entry of its own names, for nobody's:
// another process's entry may name it.
func (s *Store) Shared() bool {
	sh, ok := s.b.(interface{ Shared() bool })
	return ok && sh.Shared()
}

// Open opens (creating if needed) a blob store in dir: files named by their
// hex SHA-256, in 256 subdirectories named by the first two hex digits.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening blob store: %w", err)
	}
	return New(dirBackend(dir)), nil
}

// Sum returns the hex SHA-256 by which a blob is named.
func Sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// checkName fails for what is not a lowercase hex SHA-256.
func checkName(sum string) error {
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != sum {
		return fmt.Errorf("blob name %q is not a lowercase hex SHA-256", sum)
	}
	return nil
}

// Put stores data durably and returns its name. Putting the same bytes
// again is a no-op.
func (s *Store) Put(data []byte) (string, error) {
	sum := Sum(data)
	err := s.b.WriteBlob(sum, data)
	if errors.Is(err, ErrHeld) {
		err = s.checkHeld(sum, data)
	}
	if err != nil {
		err = fmt.Errorf("storing blob: %w", err)
		s.failed.Store(&err)
		return "", err
	}
	s.failed.Store(nil)
	return sum, nil
}

// checkHeld is Put of a name the backend holds already: done if the bytes
// held are data. A blob whose bytes went bad (a flipped bit, a hand edit)
// is left as found, for the operator to see (provlog audit names it), and
// the Put fails saying so: it is never answered as stored.
func (s *Store) checkHeld(sum string, data []byte) error {
	held, err := s.b.ReadBlob(sum)
	if err != nil {
		return fmt.Errorf("blob %s is held, but reading it back failed: %w", sum, err)
	}
	if !bytes.Equal(held, data) {
		return fmt.Errorf("blob %s is held with other bytes (%d bytes hashing to %x): it is corrupt, and left as found", sum, len(held), sha256.Sum256(held))
	}
	return nil
}

// Err returns the error of the last Put if it failed (a full or
// read-only disk, an unreachable database), else nil: health reports it,
// as a failed Put refuses a call or withholds a result.
func (s *Store) Err() error {
	if err := s.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// Get returns the blob named sum, after checking that its bytes still
// hash to sum.
func (s *Store) Get(sum string) ([]byte, error) {
	if err := checkName(sum); err != nil {
		return nil, err
	}
	b, err := s.b.ReadBlob(sum)
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
	if err := checkName(sum); err != nil {
		return err
	}
	if err := s.b.DeleteBlob(sum); err != nil {
		return fmt.Errorf("purging blob: %w", err)
	}
	return nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// Has reports whether the store holds a blob named sum (without reading
// or checking it). An error (an unreadable directory, an unreachable
// database) says neither: a caller must not take the blob for absent, or
// a retention run while the blobs' volume is away forgets them for good.
func (s *Store) Has(sum string) (bool, error) {
	if err := checkName(sum); err != nil {
		return false, err
	}
	ok, err := s.b.HasBlob(sum)
	if err != nil {
		return false, fmt.Errorf("looking up blob %s: %w", sum, err)
	}
	return ok, nil
}

// dirBackend keeps blobs as files in a directory.
type dirBackend string

func (d dirBackend) path(sum string) string { return filepath.Join(string(d), sum[:2], sum) }

func (d dirBackend) ReadBlob(sum string) ([]byte, error) {
	b, err := os.ReadFile(d.path(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	return b, err
}

func (d dirBackend) WriteBlob(sum string, data []byte) error {
	p := d.path(sum)
	if exists(p) {
		return ErrHeld
	}
	// A subdirectory made here is itself an entry of the store's
	// directory, which must reach the disk too, or a power loss could
	// take the blob with it.
	if sub := filepath.Dir(p); !exists(sub) {
		if err := os.Mkdir(sub, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := durable.SyncDir(string(d)); err != nil {
			return err
		}
	}
	return durable.WriteFile(p, data, 0o600)
}

func (d dirBackend) DeleteBlob(sum string) error {
	p := d.path(sum)
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return nil // absent, perhaps with its directory
	} else if err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(p))
}

func (d dirBackend) HasBlob(sum string) (bool, error) {
	_, err := os.Stat(d.path(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

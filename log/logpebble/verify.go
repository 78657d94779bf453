package logpebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	pebblerecord "github.com/cockroachdb/pebble/v2/record"
	"github.com/provlog/provlog/log"
)

// VerifyReport says what [Store.Verify] read.
type VerifyReport struct {
	Keys  uint64 // keys read, with their values
	Bytes uint64 // bytes of keys and values read
	// Warnings are problems that lose no data but must not pass unseen,
	// such as a MANIFEST whose last record is torn.
	Warnings []string
}

// Verify reads every key and value of the store, so that Pebble reads, and
// checks the checksum of, every block of every file; corruption anywhere
// fails it (and the store, see [Store.Err]) with an error wrapping
// [ErrCorrupt] that names the file. It also reads the MANIFEST, whose torn
// last record Pebble drops silently on open, and reports one as a warning.
// provlog audit --data and serve --verify-on-open run it; it takes about
// as long as reading the store from disk.
func (s *Store) Verify(ctx context.Context) (*VerifyReport, error) {
	if _, err := s.acquire(ctx); err != nil {
		return &VerifyReport{}, err
	}
	defer s.calls.Done()
	rep := &VerifyReport{Warnings: append([]string(nil), s.warnings...)}
	if _, err := s.scan(ctx, nil, 0, rep); err != nil {
		return rep, err
	}
	if w, err := checkManifest(s.dir); err != nil {
		return rep, err
	} else if w != "" && !slices.Contains(rep.Warnings, w) {
		rep.Warnings = append(rep.Warnings, w)
	}
	return rep, nil
}

// scan reads every key and value from lower on, adding what it read to
// rep, until it has read budget bytes (0: to the end). It returns the key
// to go on from, or nil at the end. Corruption fails the store (readError).
// The caller holds a call (acquire).
func (s *Store) scan(ctx context.Context, lower []byte, budget uint64, rep *VerifyReport) ([]byte, error) {
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: lower})
	if err != nil {
		return nil, s.readError(fmt.Errorf("verifying the store: %w", err))
	}
	var read uint64
	var next []byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, s.readError(fmt.Errorf("verifying the store at key %x: %w", it.Key(), err))
		}
		n := uint64(len(it.Key()) + len(v))
		rep.Keys++
		rep.Bytes += n
		read += n
		if rep.Keys%4096 == 0 && ctx.Err() != nil {
			it.Close()
			return nil, ctx.Err()
		}
		if budget > 0 && read >= budget {
			next = append(bytes.Clone(it.Key()), 0) // the least key after it
			break
		}
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, s.readError(fmt.Errorf("verifying the store: %w", err))
	}
	return next, nil
}

// checkManifest reads the newest MANIFEST in dir record by record and
// describes a torn or corrupt tail ("" if it reads to a clean end).
func checkManifest(dir string) (string, error) {
	ms, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil || len(ms) == 0 {
		return "", err
	}
	sort.Strings(ms) // fixed-width numbers
	name := ms[len(ms)-1]
	f, err := os.Open(name)
	if err != nil {
		return "", log.FileFault("opening", name, err)
	}
	defer f.Close()
	r := pebblerecord.NewReader(f, 0)
	n := 0
	for {
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return fmt.Sprintf("%s: record %d is torn or corrupt (%v); Pebble ignores it on open, and the store's data checked out, but the file system lost or damaged a write", filepath.Base(name), n+1, err), nil
		}
		n++
	}
}

package anchor

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/provlog/provlog/log/durable"
)

// A Store keeps anchor records as files in one directory (by convention
// <data>/anchors), named after the anchored tree size and the first 16
// hex digits of the record's SHA-256:
// 00000000000000001234-3fa9c2d18e7b0c41.json, then
// 00000000000000001234-1-<hash>.json for a second record of the same size.
// The hash keeps the names of two sidecars sharing one log apart when
// both anchor one size (their entries named the same file, and the second
// sidecar was told its record had changed). Records stored before the
// hash was in the name, 00000000000000001234.json and
// 00000000000000001234-1.json, are read as before. Each file is written
// once, atomically and durably (temporary file, fsync, hard link to its
// name, fsync of the directory), and never changed.
type Store struct {
	dir string
}

// A Stored is one record file.
type Stored struct {
	Name string // file name, e.g. 00000000000000001234-3fa9c2d18e7b0c41.json
	// SHA256 is the hex SHA-256 of the file's bytes, which the log's
	// anchor entry records.
	SHA256 string
	Bytes  []byte
	Record *Record // nil if the file does not parse
	Err    error   // why it does not parse
}

// recordName matches a record's file name: the size, the sequence number
// of a second or later record of that size, and the record's short hash,
// absent from names given before it was added.
var recordName = regexp.MustCompile(`^([0-9]{20})(-[1-9][0-9]{0,8})?(-[0-9a-f]{16})?\.json$`)

// OpenStore opens (creating it if needed) a record directory.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating anchor store: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Put stores a record durably under a new name and returns it.
func (s *Store) Put(r *Record) (*Stored, error) {
	b, err := r.Marshal()
	if err != nil {
		return nil, err
	}
	sum := sha256Hex(b)
	n, err := s.nextSeq(r.Size)
	if err != nil {
		return nil, err
	}
	// CreateFile never replaces an existing file, so a record, once
	// named, is never overwritten.
	for ; ; n++ {
		name := fmt.Sprintf("%020d-%s.json", r.Size, sum[:16])
		if n > 0 {
			name = fmt.Sprintf("%020d-%d-%s.json", r.Size, n, sum[:16])
		}
		err := durable.CreateFile(filepath.Join(s.dir, name), b, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("storing anchor record: %w", err)
		}
		return &Stored{Name: name, SHA256: sum, Bytes: b, Record: r}, nil
	}
}

// nextSeq returns the sequence number of the next record of size: one
// past the highest stored, 0 if none is, so that names keep the order in
// which one size's records were made.
func (s *Store) nextSeq(size uint64) (int, error) {
	names, err := s.Names()
	if err != nil {
		return 0, err
	}
	prefix := fmt.Sprintf("%020d", size)
	n := 0
	for _, name := range names {
		if name[:20] == prefix {
			n = max(n, seq(name)+1)
		}
	}
	return n, nil
}

// SidecarFile, in a store's directory, holds the store's sidecar id: 16
// random hex digits, made by [Store.Sidecar] when first asked for.
const SidecarFile = "sidecar.id"

var sidecarID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// Sidecar returns the id of the sidecar whose records the store keeps,
// making it if the store has none yet. Anchor entries carry it, so that
// on a log shared by several sidecars an audit of one data dir knows
// which entries' records it must hold.
func (s *Store) Sidecar() (string, error) {
	if id, err := ReadSidecar(s.dir); err != nil || id != "" {
		return id, err
	}
	var b [8]byte
	rand.Read(b[:])
	err := durable.CreateFile(filepath.Join(s.dir, SidecarFile), []byte(hex.EncodeToString(b[:])+"\n"), 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("storing the sidecar id: %w", err)
	}
	return ReadSidecar(s.dir)
}

// ReadSidecar returns the sidecar id in the store directory dir, "" if
// it has none (no record was stored since ids were made), changing
// nothing.
func ReadSidecar(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, SidecarFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the sidecar id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !sidecarID.MatchString(id) {
		return "", fmt.Errorf("%s holds %q, not a sidecar id (16 lowercase hex digits)", filepath.Join(dir, SidecarFile), id)
	}
	return id, nil
}

// Names returns the record file names in order of tree size, then of
// sequence number.
func (s *Store) Names() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing anchor records: %w", err)
	}
	var names []string
	for _, e := range ents {
		if recordName.MatchString(e.Name()) && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := strings.Compare(a[:20], b[:20]); c != 0 {
			return c
		}
		return cmp.Or(seq(a)-seq(b), strings.Compare(a, b))
	})
	return names, nil
}

func seq(name string) int {
	m := recordName.FindStringSubmatch(name)
	if m == nil || m[2] == "" {
		return 0
	}
	n, _ := strconv.Atoi(m[2][1:])
	return n
}

// Get reads one record by name. A file that does not parse is returned
// with Err set, not as an error.
func (s *Store) Get(name string) (*Stored, error) {
	if !recordName.MatchString(name) {
		return nil, fmt.Errorf("%q is not an anchor record name: %w", name, fs.ErrNotExist)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return nil, fmt.Errorf("reading anchor record: %w", err)
	}
	st := &Stored{Name: name, SHA256: sha256Hex(b), Bytes: b}
	st.Record, st.Err = ParseRecord(b)
	return st, nil
}

// List reads every record, in the order of [Store.Names].
func (s *Store) List() ([]*Stored, error) {
	names, err := s.Names()
	if err != nil {
		return nil, err
	}
	out := make([]*Stored, 0, len(names))
	for _, n := range names {
		st, err := s.Get(n)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Last returns the newest record that parses, or nil if there is none.
func (s *Store) Last() (*Stored, error) {
	names, err := s.Names()
	if err != nil {
		return nil, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		st, err := s.Get(names[i])
		if err != nil {
			return nil, err
		}
		if st.Err == nil {
			return st, nil
		}
	}
	return nil, nil
}

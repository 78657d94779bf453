package logpebble

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// errInjected is the error injectFS returns.
var errInjected = errors.New("injected I/O error")

// An injectFS fails one chosen operation: the n-th (counting from 1) that
// match kind and the name filter. Before, the operation is not done; after,
// it is done and then reported failed (it persisted, but the caller is
// told it did not). Kinds: "write", "sync", "create", "rename", "remove".
type injectFS struct {
	vfs.FS
	kind  string
	match func(name string) bool
	after bool

	mu    sync.Mutex
	n     int // the operation to fail; 0: count only
	count int
	fired bool
}

func (f *injectFS) hit(kind, name string) bool {
	if kind != f.kind || (f.match != nil && !f.match(name)) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	if f.n > 0 && f.count == f.n {
		f.fired = true
		return true
	}
	return false
}

func (f *injectFS) Fired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

func (f *injectFS) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

func (f *injectFS) do(kind, name string, op func() error) error {
	if !f.hit(kind, name) {
		return op()
	}
	if f.after {
		if err := op(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s %s: %w", kind, name, errInjected)
}

func (f *injectFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &injectFile{File: file, fs: f, name: name}, nil
}

func (f *injectFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var file vfs.File
	err := f.do("create", name, func() (err error) { file, err = f.FS.Create(name, c); return err })
	if err != nil && file != nil {
		file.Close()
		file = nil
	}
	return f.wrap(name, file, err)
}

func (f *injectFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var file vfs.File
	err := f.do("create", name, func() (err error) { file, err = f.FS.ReuseForWrite(old, name, c); return err })
	if err != nil && file != nil {
		file.Close()
		file = nil
	}
	return f.wrap(name, file, err)
}

func (f *injectFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(name, file, err)
}

func (f *injectFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	return f.wrap(name, file, err)
}

func (f *injectFS) Rename(old, name string) error {
	return f.do("rename", name, func() error { return f.FS.Rename(old, name) })
}

func (f *injectFS) Remove(name string) error {
	return f.do("remove", name, func() error { return f.FS.Remove(name) })
}

type injectFile struct {
	vfs.File
	fs   *injectFS
	name string
}

func (f *injectFile) Write(p []byte) (n int, err error) {
	err = f.fs.do("write", f.name, func() (err error) { n, err = f.File.Write(p); return err })
	return n, err
}

func (f *injectFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = f.fs.do("write", f.name, func() (err error) { n, err = f.File.WriteAt(p, off); return err })
	return n, err
}

func (f *injectFile) Sync() error {
	return f.fs.do("sync", f.name, f.File.Sync)
}

func (f *injectFile) SyncData() error {
	return f.fs.do("sync", f.name, f.File.SyncData)
}

func (f *injectFile) SyncTo(length int64) (full bool, err error) {
	err = f.fs.do("sync", f.name, func() (err error) { full, err = f.File.SyncTo(length); return err })
	return full, err
}

// fileKind names the kind of Pebble file name is, for the test names.
func fileKind(name string) string {
	base := name[strings.LastIndexAny(name, "/\\")+1:]
	switch {
	case strings.HasSuffix(base, ".log"):
		return "wal"
	case strings.HasSuffix(base, ".sst"):
		return "sst"
	case strings.HasPrefix(base, "MANIFEST"):
		return "manifest"
	case strings.HasPrefix(base, "marker."):
		return "marker"
	case strings.HasPrefix(base, "OPTIONS"):
		return "options"
	}
	return "other"
}

// Package durable writes files so that a crash leaves the old state
// or the new one, never a torn file, and a nil error means the bytes and
// the name are both on disk: the data goes to a temporary file beside the
// target, which is synced, moved into place and followed by a sync of the
// directory. It is the one way provlog writes a file it must not lose
// (blobs, anchor records, keys, tokens, config, cosigned checkpoints, the
// task index).
package durable

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, durably, with permissions exactly
// perm (the umask neither widens nor narrows them).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return WriteFileFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileAs is WriteFile giving the new file owner uid and group gid
// (-1: the writer's) before it replaces path: a file another user's
// program reads (a service's config, edited by an admin or root) stays
// that user's, where the writer's would lock its program out. If the
// owner cannot be given (the writer may not), path is left as it was.
func WriteFileAs(path string, data []byte, perm fs.FileMode, uid, gid int) error {
	tmp, err := writeTemp(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op once renamed
	if uid != -1 || gid != -1 {
		if err := os.Chown(tmp, uid, gid); err != nil {
			return fmt.Errorf("giving the new %s owner %d:%d, as the file it replaces: %w", path, uid, gid, err)
		}
		// chown clears setuid and setgid bits: the mode is set again.
		if err := os.Chmod(tmp, perm); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteFileFunc replaces path, durably, with what write writes, as
// WriteFile does: for a file written as it is made rather than held in
// memory whole. If write fails, path is left as it was.
func WriteFileFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	tmp, err := writeTemp(path, perm, write)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op once renamed
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// CreateFile writes data to path, durably, only if path does not exist:
// it never replaces a file (a hard link does not), and fails with an error
// wrapping fs.ErrExist if one is there. The permissions are exactly perm.
func CreateFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && errors.Is(le.Err, fs.ErrExist) {
			return fmt.Errorf("creating %s: %w", path, fs.ErrExist)
		}
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes a new synced temporary file in path's directory with
// write and returns its name.
func writeTemp(path string, perm fs.FileMode, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	err = write(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// SyncDir syncs a directory, making the names created or removed in it
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

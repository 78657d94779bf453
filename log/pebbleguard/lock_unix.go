//go:build unix

package pebbleguard

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// readOnlyLock stands in for Pebble's directory lock when the lock file
// cannot be opened for writing because the file system is read-only. It
// holds no lock (taking a read lock with fcntl would replace, and on
// close drop, a write lock this process holds), but it refuses to go on
// while another process holds the write lock. Nobody can write through a
// read-only mount; a writer on another, writable mount of the same
// directory is not excluded.
func readOnlyLock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		f.Close()
		return nil, err
	}
	if lk.Type != syscall.F_UNLCK {
		f.Close()
		return nil, errors.New("lock held by another process")
	}
	return f, nil
}

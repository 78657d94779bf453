//go:build unix

package pebbleguard

import (
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// private makes f readable and writable by its owner alone (0600)
// through its descriptor. A file without one (an in-memory file system's)
// is left as it is, and so is one another user owns (EPERM): a store
// shared through a group on purpose keeps working as it did.
func private(f vfs.File) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil
	}
	if err := syscall.Fchmod(int(fd), fileMode); err != nil && err != syscall.EPERM {
		return err
	}
	return nil
}

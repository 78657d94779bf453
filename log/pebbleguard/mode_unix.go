//go:build unix

package pebbleguard

import (
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// private makes f readable and writable by its owner alone (0600)
// through its descriptor; a file without one (an in-memory file system's)
// is left as it is.
func private(f vfs.File) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil
	}
	return syscall.Fchmod(int(fd), fileMode)
}

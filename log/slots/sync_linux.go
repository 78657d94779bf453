package slots

import (
	"os"
	"syscall"
)

// syncData syncs f's data (and its size), not its times: fdatasync.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

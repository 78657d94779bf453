//go:build !linux

package slots

import "os"

// syncData syncs f; without fdatasync, that is a full fsync.
func syncData(f *os.File) error { return f.Sync() }

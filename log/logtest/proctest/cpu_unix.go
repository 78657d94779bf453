//go:build unix

package proctest

import (
	"syscall"
	"time"
)

// CPU returns the CPU time this process has used, user and system: what
// a benchmark reports per operation as cpu-ns/op, beside the wall time
// that a shared machine's load makes noisy.
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

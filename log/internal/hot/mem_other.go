//go:build !(linux || darwin || freebsd || openbsd || netbsd)

package hot

// mapMemory returns n bytes of zeroed memory; where mmap is not at hand,
// from the Go heap.
func mapMemory(n int) ([]byte, error) { return make([]byte, n), nil }

func unmapMemory([]byte) {}

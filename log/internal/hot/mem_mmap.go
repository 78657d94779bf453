//go:build linux || darwin || freebsd || openbsd || netbsd

package hot

import "syscall"

// mapMemory returns n bytes of zeroed memory mapped outside the Go heap.
func mapMemory(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func unmapMemory(b []byte) { syscall.Munmap(b) }

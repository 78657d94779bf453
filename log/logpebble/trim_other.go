//go:build !(cgo && linux)

package logpebble

// Without cgo Pebble allocates from the Go heap, which the Go runtime
// returns to the OS by itself; elsewhere there is no glibc to trim.
func canTrimMalloc() bool { return false }

func trimMalloc() {}

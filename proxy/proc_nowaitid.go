//go:build !linux

package proxy

// Elsewhere than on Linux a stdio server's exit is not watched (exitWatch):
// its connection ends with its stdout.
func exited(int, bool) bool { return false }

const canWatchExit = false

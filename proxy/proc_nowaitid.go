//go:build !linux

package proxy

// ReaperMain returns at once: elsewhere than on Linux a stdio server is
// started by the sidecar itself, not through a reaper (reaper_linux.go).
func ReaperMain() {}

// startProcess starts p, a stdio server. Elsewhere than on Linux it is
// not tied to the sidecar (no parent-death signal): it reads the end of
// its stdin when the sidecar dies.
func startProcess(p *process) error { return p.Start() }

// Elsewhere than on Linux a stdio server's exit is not watched (exitWatch):
// its connection ends with its stdout.
func exited(int, bool) bool { return false }

const canWatchExit = false

//go:build !linux

package main

// tickfxChild: the server of TestDownstreamDiesWithSidecar, which ties a
// stdio server to the sidecar by a Linux parent-death signal, runs on
// Linux only.
func tickfxChild() bool { return false }

// forkfxChild: the server of the reaper's tests (reaper_linux_test.go),
// whose keeper is a Linux child subreaper, runs on Linux only.
func forkfxChild() bool { return false }

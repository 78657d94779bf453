//go:build !linux

package main

// tickfxChild: the server of TestDownstreamDiesWithSidecar, which ties a
// stdio server to the sidecar by a Linux parent-death signal, runs on
// Linux only.
func tickfxChild() bool { return false }

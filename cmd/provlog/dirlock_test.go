package main

import (
	"strings"
	"testing"
)

// TestDataDirLock: a data dir's lock is held by one holder at a time,
// also within one process, and is free again once closed.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "in use by another provlog sidecar") {
		t.Errorf("a second lock of a held data dir: %v", err)
	}
	l.Close()
	l, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("the lock after it was let go: %v", err)
	}
	l.Close()
}

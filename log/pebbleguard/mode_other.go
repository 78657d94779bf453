//go:build !unix

package pebbleguard

import "github.com/cockroachdb/pebble/v2/vfs"

// private does nothing where file modes are not Unix ones.
func private(vfs.File) error { return nil }

//go:build !unix

package pebbleguard

import (
	"errors"
	"io"
)

func readOnlyLock(string) (io.Closer, error) {
	return nil, errors.New("opening a store on a read-only file system is supported on Unix only")
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// dataDirLock is the file a sidecar on a shared log holds locked in its
// data dir for as long as it runs. Pebble's own lock keeps two sidecars
// off one data dir when the log is in it; on a shared log nothing did, and
// two sidecars given one data dir both wrote its record of the checkpoints
// handed out (and its task index and sidecar.json), each over the other's.
const dataDirLock = "serve.lock"

// lockDataDir takes data's lock (flock: another open of the file, in this
// process or another, is refused while it is held), or says who to blame.
func lockDataDir(data string) (io.Closer, error) {
	p := filepath.Join(data, dataDirLock)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking data dir %s: %w", data, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another provlog sidecar on the shared log: give each sidecar its own data dir (with a copy of the keys), or stop the other one", data)
		}
		return nil, fmt.Errorf("locking data dir %s: %w", data, err)
	}
	return f, nil
}

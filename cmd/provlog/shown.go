package main

// The newest checkpoint a sidecar on a shared store showed, kept in its
// data dir (handed-out.0 and handed-out.1): a Pebble store keeps its own
// published record; a shared one (PostgreSQL) that lost commits in a
// failover was served on by a restarted sidecar, which signed a second
// history. The sequencer hands each newer checkpoint here before anyone
// sees it (SequencerOptions.Shown), and the next start checks the store
// still holds it (checkHandedOut).
//
// Each write overwrites the older of two slots in place, with no sync: a
// process crash loses nothing written (the page cache keeps it), a torn
// slot (a machine crash while writing it) fails its checksum and the
// other holds the checkpoint before. Both slots are synced at close.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/provlog/provlog/log"
)

const shownMagic = "provlog handed-out v1\n"

// shownSlot is the name of slot i in a data dir.
func shownSlot(data string, i int) string {
	return filepath.Join(data, "handed-out."+strconv.Itoa(i))
}

// encodeShown is a slot's bytes: magic, the note's length, the note and
// its SHA-256.
func encodeShown(cp []byte) []byte {
	sum := sha256.Sum256(cp)
	b := append([]byte(shownMagic), strconv.Itoa(len(cp))+"\n"...)
	b = append(b, cp...)
	return append(b, hex.EncodeToString(sum[:])+"\n"...)
}

// decodeShown returns the note a slot holds, or false if it is torn.
func decodeShown(b []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(shownMagic))
	if !ok {
		return nil, false
	}
	nb, rest, ok := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.Atoi(string(nb))
	if !ok || err != nil || n < 0 || n+2*sha256.Size+1 > len(rest) {
		return nil, false
	}
	cp, sum := rest[:n], rest[n:n+2*sha256.Size]
	want := sha256.Sum256(cp)
	return cp, hex.EncodeToString(want[:]) == string(sum)
}

// readShown returns the newest checkpoint the slots of data hold: nil if
// there are none, an error if there are slots and none is whole.
func readShown(data string) ([]byte, error) {
	var best []byte
	var bestSize uint64
	found := false
	for i := range 2 {
		b, err := os.ReadFile(shownSlot(data, i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		found = found || len(b) > 0
		cp, ok := decodeShown(b)
		if !ok {
			continue
		}
		c, err := log.ParseCheckpointNote(cp)
		if err == nil && (best == nil || c.Size > bestSize) {
			best, bestSize = cp, c.Size
		}
	}
	if found && best == nil {
		return nil, fmt.Errorf("%s and %s hold no whole checkpoint: what this sidecar showed of the shared log is unknown; remove them only if that is accepted", shownSlot(data, 0), shownSlot(data, 1))
	}
	return best, nil
}

// shownRecord writes the slots.
type shownRecord struct {
	files [2]*os.File
	next  int
}

// openShownRecord opens (making them) the slots of data; the first write
// goes to the slot not holding the newest checkpoint.
func openShownRecord(data string) (*shownRecord, error) {
	r := &shownRecord{}
	var sizes [2]uint64
	for i := range 2 {
		f, err := os.OpenFile(shownSlot(data, i), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			r.close()
			return nil, err
		}
		r.files[i] = f
		if b, err := os.ReadFile(shownSlot(data, i)); err == nil {
			if cp, ok := decodeShown(b); ok {
				if c, err := log.ParseCheckpointNote(cp); err == nil {
					sizes[i] = c.Size
				}
			}
		}
	}
	if sizes[0] > sizes[1] {
		r.next = 1
	}
	return r, nil
}

// write records cp, overwriting the older slot.
func (r *shownRecord) write(cp []byte) error {
	b := encodeShown(cp)
	f := r.files[r.next]
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	r.next ^= 1
	return nil
}

// close syncs and closes both slots.
func (r *shownRecord) close() error {
	var errs []error
	for _, f := range r.files {
		if f != nil {
			errs = append(errs, f.Sync(), f.Close())
		}
	}
	return errors.Join(errs...)
}

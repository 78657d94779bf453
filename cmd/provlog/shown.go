package main

// The newest checkpoint a sidecar on a shared store showed, kept in its
// data dir (handed-out.0 and handed-out.1): a Pebble store keeps its own
// published record; a shared one (PostgreSQL) that lost commits in a
// failover was served on by a restarted sidecar, which signed a second
// history. The sequencer hands each newer checkpoint here before anyone
// sees it (SequencerOptions.Shown), and the next start checks the store
// still holds it (checkHandedOut).
//
// The record is two slots kept by log/slots, on the terms of a Pebble
// store's published record: each write overwrites the older slot in place
// before the checkpoint leaves the sequencer, the slots are synced
// (fdatasync) in the background at most every slots.DefaultSyncInterval
// (50 ms) while they change, and at close. A process crash loses nothing
// written (the page cache keeps it); a slot torn by a crash while it was
// written fails its checksum, and the other holds the checkpoint before.
// What is left: a machine crash may lose the record of the checkpoints
// shown in the last 50 ms before it, and a start after a failover that
// lost those same commits is then not refused (one that lost more is).
//
// Syncing each write before the hand-out would close that window, at the
// cost of an fdatasync per commit of a shared log: measured on the 2-core
// development VM (BenchmarkShownOnPostgres, log/slots BenchmarkWrite), an
// fdatasync of a slot took 0.1-0.2 ms back to back and 0.45-0.55 ms after
// 1.5 ms idle, and a one-appender commit to PostgreSQL on loopback went
// from 0.67-0.87 ms (background) to 0.91-1.54 ms (synced): not small next
// to a commit, so the sync stays in the background. A failed background
// sync stops the record: the next checkpoint is not shown, and the log
// stops.
//
// A slot holds
//
//	"provlog handed-out v1\n"
//	the note's length in decimal, "\n"
//	the note
//	its SHA-256 in hex, "\n"
//
// followed by zero bytes to the end of the file (files written before
// log/slots end at the newline).
//
// The newest checkpoint /log/checkpoint served (served.0 and served.1)
// is kept the same way, whatever the store, with its own magic
// ("provlog served v1\n"): a restarted sidecar serves none older
// (APIOptions.ServedBefore), though the witnesses' cosigned checkpoint it
// prefers may be. It is written only when /log/checkpoint serves a newer
// checkpoint than before, at most once per commit.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/slots"
)

// A noteSlots is a record of one checkpoint note in two slots of a data
// dir: name.0 and name.1, each beginning with magic.
type noteSlots struct {
	name  string
	magic string
	what  string // what the record holds, for errors
}

var (
	// shownOut is the newest checkpoint a sidecar on a shared store
	// showed.
	shownOut = noteSlots{"handed-out", "provlog handed-out v1\n", "what this sidecar showed of the shared log"}
	// servedOut is the newest checkpoint /log/checkpoint served.
	servedOut = noteSlots{"served", "provlog served v1\n", "the newest checkpoint /log/checkpoint served"}
)

// noteInitial is the bytes each slot is zero-filled to on creation.
const noteInitial = 4 << 10

// slot is the name of slot i in a data dir.
func (k noteSlots) slot(data string, i int) string {
	return filepath.Join(data, k.name+"."+strconv.Itoa(i))
}

// encode is a slot's bytes: magic, the note's length, the note and its
// SHA-256.
func (k noteSlots) encode(cp []byte) []byte {
	sum := sha256.Sum256(cp)
	b := append([]byte(k.magic), strconv.Itoa(len(cp))+"\n"...)
	b = append(b, cp...)
	return append(b, hex.EncodeToString(sum[:])+"\n"...)
}

// decode returns the note a slot holds, or false if it is torn. What
// follows the checksum's newline (the zero fill) is not read.
func (k noteSlots) decode(b []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(k.magic))
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

// options is how the record of data is kept; fail is told of a failed
// background sync.
func (k noteSlots) options(data string, fail func(error)) slots.Options {
	return slots.Options{
		Names:        [2]string{k.slot(data, 0), k.slot(data, 1)},
		Perm:         0o600,
		Initial:      noteInitial,
		SyncInterval: slots.DefaultSyncInterval,
		Fail:         fail,
	}
}

// parse returns the checkpoint a slot holds and its size; false if the
// slot holds no whole, parsable one.
func (k noteSlots) parse(b []byte) ([]byte, uint64, bool) {
	cp, ok := k.decode(b)
	if !ok {
		return nil, 0, false
	}
	c, err := log.ParseCheckpointNote(cp)
	if err != nil {
		return nil, 0, false
	}
	return bytes.Clone(cp), c.Size, true
}

// readSlots reads the slots of data, oldest checkpoint first.
func (k noteSlots) readSlots(data string) ([]slots.Slot[[]byte], error) {
	// One slot torn (a power loss during its write) leaves the other's
	// checkpoint, older: the rollback check holds the log to that.
	ss, _, err := slots.Read(k.options(data, nil), k.parse)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is unknown; remove them only if that is accepted", err, k.what)
	}
	return ss, nil
}

// read returns the newest checkpoint the slots of data hold: nil if there
// are none, an error if both hold something and neither a whole
// checkpoint.
func (k noteSlots) read(data string) ([]byte, error) {
	ss, err := k.readSlots(data)
	if err != nil || len(ss) == 0 {
		return nil, err
	}
	return ss[len(ss)-1].Value, nil
}

// noteRecord writes the slots.
type noteRecord struct {
	k noteSlots
	w *slots.Writer
}

// open opens (making them) the slots of data; the first write goes to the
// slot not holding the newest checkpoint. fail, if not nil, is told at
// once of a failed background sync (every later write fails).
func (k noteSlots) open(data string, fail func(error)) (*noteRecord, error) {
	ss, err := k.readSlots(data)
	if err != nil {
		return nil, err
	}
	w, err := slots.Open(k.options(data, fail), slots.Next(ss))
	if err != nil {
		return nil, err
	}
	return &noteRecord{k: k, w: w}, nil
}

// write records cp, overwriting the older slot; it fails once the record
// stopped.
func (r *noteRecord) write(cp []byte) error {
	return r.w.Write(r.k.encode(cp))
}

// err returns why the record stopped (a failed write or background
// sync), or nil.
func (r *noteRecord) err() error {
	return r.w.Err()
}

// close syncs and closes both slots; its error is why the record
// stopped, if it did.
func (r *noteRecord) close() error {
	return r.w.Close()
}

package witnesspebble

// The recorded-checkpoint record: for each checkpoint key
// ("checkpoint/<origin>"), the size and root hash of the checkpoint the
// KV last recorded, kept outside Pebble, so that a write-ahead log that
// loses its tail (a flipped byte in its last record, which Pebble v2.1.7
// reads as a write torn by a crash and drops in silence; a torn sector; a
// disk that lied about a sync) cannot take back a checkpoint the witness
// cosigned: the witness would then cosign another root at that size, a
// second history. It is log/logpebble's published-batch record for the
// witness, on the same log/slots.
//
// Two files, recorded.0 and recorded.1, in the store's directory, kept by
// log/slots with no background sync: CompareAndSwap writes the record
// after Pebble's synced commit returned and before it returns, and the
// record is fdatasync'ed before it does, so a cosignature (answered only
// once CompareAndSwap returned nil) is never out before both are durable.
// Swaps that write at once share one record write and sync.
//
// What a crash leaves: killed between Pebble's sync and the record's
// write, Pebble holds the new checkpoint and the record the one before
// (one step behind). That is safe and opens: nothing was answered for the
// new checkpoint, and the witness going on from it is the witness having
// recorded a checkpoint whose answer was lost, which it may do at any
// time; the record is a floor Pebble must not be below, never a ceiling.
// The record is never ahead of what Pebble made durable, so at open a
// checkpoint key Pebble holds at a smaller size than the record, or at
// the same size with another root, or not at all, is a write-ahead log
// that lost what it synced: Open refuses, naming the origin, both sizes
// and the file, and repairs nothing. A slot holds
//
//	magic   "PLWIT1\n\x00" (8 bytes)
//	length  of the body, uint64 big-endian
//	body    seq (uint64, one more each write); count (uint32); each key:
//	        length (uint32), key, size (uint64), root length (uint32),
//	        root
//	sum     SHA-256 of magic, length and body
//
// followed by zero bytes to the end of the file. A value that does not
// parse as a checkpoint note is not in the record.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/slots"
)

const (
	recordedMagic   = "PLWIT1\n\x00"
	recordedInitial = 4 << 10 // bytes each slot is zero-filled to on creation
	checkpointKey   = "checkpoint/"
	maxRecordedKey  = 64 << 10
	maxRecordedRoot = 64
)

// recordedSlots is how the record of the store in dir is kept.
func recordedSlots(dir string) slots.Options {
	return slots.Options{
		Names: [2]string{filepath.Join(dir, "recorded.0"), filepath.Join(dir, "recorded.1")},
		Perm:  0o600,
		// A Write is synced before it returns: CompareAndSwap returns
		// only once the record is durable.
		Initial: recordedInitial,
	}
}

// A mark is the size and root of the checkpoint a key last held.
type mark struct {
	size uint64
	root []byte
}

// recordedState is the decoded record.
type recordedState struct {
	seq   uint64
	marks map[string]mark
	file  string // the slot it was read from
}

func encodeRecorded(dst []byte, seq uint64, marks map[string]mark) []byte {
	dst = append(dst[:0], recordedMagic...)
	dst = binary.BigEndian.AppendUint64(dst, 0) // length, below
	dst = binary.BigEndian.AppendUint64(dst, seq)
	keys := make([]string, 0, len(marks))
	for k := range marks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(keys)))
	for _, k := range keys {
		m := marks[k]
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint64(dst, m.size)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.root)))
		dst = append(dst, m.root...)
	}
	binary.BigEndian.PutUint64(dst[8:16], uint64(len(dst)-16))
	sum := sha256.Sum256(dst)
	return append(dst, sum[:]...)
}

// decodeRecorded parses a slot; ok is false for a slot that holds no
// whole record (never written, torn or damaged).
func decodeRecorded(b []byte) (r recordedState, ok bool) {
	if len(b) < 16+sha256.Size || string(b[:8]) != recordedMagic {
		return r, false
	}
	n := binary.BigEndian.Uint64(b[8:16])
	if n > uint64(len(b)-16-sha256.Size) {
		return r, false
	}
	body, sum := b[16:16+n], b[16+n:16+n+sha256.Size]
	if got := sha256.Sum256(b[:16+n]); !bytes.Equal(got[:], sum) {
		return r, false
	}
	d := slots.Decoder{B: body}
	r.seq = d.U64()
	count := d.U32()
	if uint64(count) > uint64(len(body)) {
		return r, false
	}
	r.marks = make(map[string]mark, count)
	for range count {
		kl := d.U32()
		if kl > maxRecordedKey {
			return r, false
		}
		k := string(d.Bytes(int(kl)))
		size := d.U64()
		rl := d.U32()
		if rl > maxRecordedRoot {
			return r, false
		}
		root := d.Bytes(int(rl))
		if _, dup := r.marks[k]; dup || d.Bad {
			return r, false
		}
		r.marks[k] = mark{size: size, root: root}
	}
	if d.Bad || len(d.B) != 0 {
		return r, false
	}
	return r, true
}

// markOf returns the mark of a checkpoint key's value, or false if key is
// not a checkpoint key or its value not a checkpoint note.
func markOf(key, value []byte) (mark, bool) {
	if !bytes.HasPrefix(key, []byte(checkpointKey)) {
		return mark{}, false
	}
	c, err := log.ParseCheckpointNote(value)
	if err != nil {
		return mark{}, false
	}
	return mark{size: c.Size, root: c.Hash}, true
}

// readRecorded reads the newest whole record of dir: empty if there is
// none; an error wrapping ErrCorrupt if both slots are torn.
func readRecorded(dir string) (recordedState, int, error) {
	ss, _, err := slots.Read(recordedSlots(dir), func(b []byte) (recordedState, uint64, bool) {
		r, ok := decodeRecorded(b)
		return r, r.seq, ok
	})
	if err != nil {
		return recordedState{}, 0, fmt.Errorf("%w: the recorded-checkpoint record: %w", ErrCorrupt, err)
	}
	if len(ss) == 0 {
		return recordedState{marks: map[string]mark{}}, 0, nil
	}
	r := ss[len(ss)-1].Value
	r.file = recordedSlots(dir).Names[ss[len(ss)-1].Index]
	return r, slots.Next(ss), nil
}

// checkRecorded refuses a Pebble state behind the record: every key the
// record holds must be in Pebble at its size and root, or ahead of it.
func checkRecorded(r recordedState, get func(key []byte) ([]byte, error)) error {
	keys := make([]string, 0, len(r.marks))
	for k := range r.marks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		want := r.marks[k]
		origin := strings.TrimPrefix(k, checkpointKey)
		v, err := get([]byte(k))
		if errors.Is(err, log.ErrNotFound) {
			return fmt.Errorf("%w: %s records a checkpoint of %q at size %d, and Pebble holds none: its write-ahead log lost what it synced; refusing to go back (the witness would cosign a second history)", ErrCorrupt, r.file, origin, want.size)
		} else if err != nil {
			return err
		}
		got, ok := markOf([]byte(k), v)
		switch {
		case !ok:
			return fmt.Errorf("%w: the checkpoint of %q in Pebble does not parse; %s records size %d", ErrCorrupt, origin, r.file, want.size)
		case got.size < want.size:
			return fmt.Errorf("%w: the checkpoint of %q is at size %d in Pebble, behind size %d recorded in %s after Pebble's sync: its write-ahead log lost what it synced; refusing to go back (the witness would cosign a second history)", ErrCorrupt, origin, got.size, want.size, r.file)
		case got.size == want.size && !bytes.Equal(got.root, want.root):
			return fmt.Errorf("%w: the checkpoint of %q at size %d in Pebble has another root than the one recorded in %s", ErrCorrupt, origin, got.size, r.file)
		}
	}
	return nil
}

// A recorder writes the record: swaps that call write at once share one
// record write and sync.
type recorder struct {
	w *slots.Writer

	mu      sync.Mutex // guards marks, seq, wanted
	marks   map[string]mark
	seq     uint64 // of the record last encoded
	wanted  uint64 // bumped by each change to marks
	writeMu sync.Mutex
	written uint64 // the wanted a durable record covers; under writeMu
	buf     []byte // under writeMu
}

// write records key's mark and returns once a record holding it (or a
// later one) is durable.
func (r *recorder) write(key string, m mark) error {
	r.mu.Lock()
	r.marks[key] = m
	r.wanted++
	mine := r.wanted
	r.mu.Unlock()

	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	if r.written >= mine {
		return nil
	}
	r.mu.Lock()
	r.seq++
	cover := r.wanted
	r.buf = encodeRecorded(r.buf, r.seq, r.marks)
	r.mu.Unlock()
	if err := r.w.Write(r.buf); err != nil {
		return err
	}
	r.written = cover
	return nil
}

// openRecorder reads the record of dir, refuses a Pebble state (db) behind
// it, and opens it for writing. A checkpoint key Pebble holds that the
// record lacks (a store from before the record) is added to it, and that
// record written, before Open returns.
func openRecorder(dir string, db *pebble.DB, get func(key []byte) ([]byte, error)) (*recorder, error) {
	r, next, err := readRecorded(dir)
	if err != nil {
		return nil, err
	}
	if err := checkRecorded(r, get); err != nil {
		return nil, err
	}
	missing, err := unrecorded(db, r.marks)
	if err != nil {
		return nil, err
	}
	w, err := slots.Open(recordedSlots(dir), next)
	if err != nil {
		return nil, err
	}
	rec := &recorder{w: w, marks: r.marks, seq: r.seq}
	if len(missing) > 0 {
		maps.Copy(rec.marks, missing)
		rec.seq++
		if err := w.Write(encodeRecorded(nil, rec.seq, rec.marks)); err != nil {
			w.Close()
			return nil, err
		}
	}
	return rec, nil
}

// unrecorded returns the marks of the checkpoint keys in db that marks
// lacks.
func unrecorded(db *pebble.DB, marks map[string]mark) (map[string]mark, error) {
	lower := []byte(checkpointKey)
	upper := append(bytes.Clone(lower[:len(lower)-1]), lower[len(lower)-1]+1)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint keys: %w", err)
	}
	out := map[string]mark{}
	for it.First(); it.Valid(); it.Next() {
		if _, ok := marks[string(it.Key())]; ok {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("reading key %q: %w", it.Key(), err)
		}
		if m, ok := markOf(it.Key(), v); ok {
			m.root = bytes.Clone(m.root)
			out[string(it.Key())] = m
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("reading the checkpoint keys: %w", err)
	}
	return out, nil
}

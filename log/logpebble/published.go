package logpebble

// The published-batch record: the last batches the store acknowledged,
// kept outside Pebble, so that a write-ahead log that loses its tail (a
// flipped byte near its end, a torn sector, a disk that lied about a sync)
// cannot take them, and the checkpoints they were acknowledged with, away
// unnoticed. See "Forks" in the package doc.
//
// Two files, published.0 and published.1, in the store's directory, kept
// by log/slots (the package doc says what a crash leaves). Each commit
// overwrites the older one in place with its whole batch, right after
// Pebble's commit returned and before the batch is acknowledged; the files
// are fdatasync'ed in the background at most every
// [publishedSyncInterval], so the record adds no fsync to a commit (its
// cost is writing each batch twice, to the page cache). What that leaves:
// a machine crash within that interval of a commit may lose the record of
// the newest batches, never the batches (they are in Pebble's synced WAL);
// the record is there to catch a WAL that later loses what it synced, and
// it survives every process crash. Written after Pebble's sync, the record
// is never ahead of what Pebble made durable, so a crash cannot make it
// claim a batch that was never committed. A slot holds
//
//	magic   "PLPUB1\n\x00" (8 bytes)
//	length  of the body, uint64 big-endian
//	body    start, size (uint64 each); the compact range of [0, size):
//	        count (uint32), 32-byte hashes; the checkpoint: length
//	        (uint32), note; the entries: count (uint32), each length
//	        (uint32) and bytes
//	sum     SHA-256 of magic, length and body
//
// followed by zero bytes to the end of the file. A slot whose sum does not
// match (torn by a crash while it was written) is ignored: the other slot
// holds the batch before it. Two slots that both fail it are refused
// (readRecords): a crash tears the slot being written, and both only if
// the machine stopped within publishedSyncInterval of writing each
// (log/slots); the operator says whether the store may open without the
// record.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/slots"
)

// publishedSyncInterval is how often the published record is synced while
// commits change it.
const publishedSyncInterval = slots.DefaultSyncInterval

const (
	publishedMagic   = "PLPUB1\n\x00"
	publishedInitial = 256 << 10 // bytes each slot is zero-filled to on creation
)

// publishedName is the file of slot i.
func publishedName(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("published.%d", i))
}

// A record is one published batch.
type record struct {
	slot    int
	start   uint64
	size    uint64
	rng     [][]byte
	cp      []byte
	entries [][]byte
}

// publisher writes the records of a writable store.
type publisher struct {
	w    *slots.Writer
	buf  []byte
	fail func(error) // fails the store
}

func encodeRecord(dst []byte, b *log.Batch) []byte {
	dst = append(dst[:0], publishedMagic...)
	dst = binary.BigEndian.AppendUint64(dst, 0) // length, below
	dst = binary.BigEndian.AppendUint64(dst, b.Start)
	dst = binary.BigEndian.AppendUint64(dst, b.State.Size)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.State.Range)))
	for _, h := range b.State.Range {
		dst = append(dst, h...)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.State.Checkpoint)))
	dst = append(dst, b.State.Checkpoint...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.Entries)))
	for _, e := range b.Entries {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e)))
		dst = append(dst, e...)
	}
	binary.BigEndian.PutUint64(dst[8:16], uint64(len(dst)-16))
	sum := sha256.Sum256(dst)
	return append(dst, sum[:]...)
}

// decodeRecord parses a slot; ok is false for a slot that holds no
// complete record (never written, or torn).
func decodeRecord(b []byte) (r record, ok bool) {
	if len(b) < 16+sha256.Size || string(b[:8]) != publishedMagic {
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
	r.start, r.size = d.U64(), d.U64()
	for range d.U32() {
		r.rng = append(r.rng, d.Bytes(hashSize))
	}
	r.cp = d.Bytes(int(d.U32()))
	for range d.U32() {
		r.entries = append(r.entries, d.Bytes(int(d.U32())))
	}
	if d.Bad || len(d.B) != 0 || r.size != r.start+uint64(len(r.entries)) || r.start >= r.size {
		return r, false
	}
	return r, true
}

// NewestPublished returns the checkpoint of the newest batch the store in
// dir acknowledged, as its published record holds it, without opening
// the store; nil if there is none (no store there, or an old one). A
// program pointing a data dir at another store (a shared one) checks that
// store holds it: the data dir's own log handed it out.
func NewestPublished(dir string) ([]byte, error) {
	rs, _, err := readRecords(dir)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return bytes.Clone(rs[len(rs)-1].cp), nil
}

// publishedSlots is how the record of the store in dir is kept; a
// background sync that fails calls fail.
func publishedSlots(dir string, fail func(error)) slots.Options {
	return slots.Options{
		Names:        [2]string{publishedName(dir, 0), publishedName(dir, 1)},
		Perm:         0o600,
		Initial:      publishedInitial,
		SyncInterval: publishedSyncInterval,
		Fail:         fail,
	}
}

// readRecords reads both slots of dir, oldest batch first, and names a
// slot that holds a torn or damaged record. A missing file is an empty
// slot; two slots that both hold a torn or damaged record are an error.
func readRecords(dir string) ([]record, []string, error) {
	ss, torn, err := slots.Read(publishedSlots(dir, nil), func(b []byte) (record, uint64, bool) {
		r, ok := decodeRecord(b)
		return r, r.size, ok
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the published-batch record: %w; the batches it held are in Pebble unless its write-ahead log lost them too: move both files aside to open the store without the record", ErrCorrupt, err)
	}
	rs := make([]record, len(ss))
	for i, s := range ss {
		rs[i] = s.Value
		rs[i].slot = s.Index
	}
	return rs, torn, nil
}

// openPublisher opens (creating them) both slots for writing; the first
// commit overwrites the slot that does not hold the newest record.
func openPublisher(dir string, newest []record, fail func(error)) (*publisher, error) {
	next := 0
	if len(newest) > 0 {
		next = 1 - newest[len(newest)-1].slot
	}
	w, err := slots.Open(publishedSlots(dir, fail), next)
	if err != nil {
		return nil, err
	}
	return &publisher{w: w, fail: fail}, nil
}

// write records b in the next slot (synced in the background).
func (p *publisher) write(b *log.Batch) error {
	p.buf = encodeRecord(p.buf, b)
	err := p.w.Write(p.buf)
	if cap(p.buf) > 4<<20 {
		p.buf = nil // one huge batch should not pin its buffer
	}
	return err
}

// close syncs what is left and closes the files; a failed sync fails the
// store.
func (p *publisher) close() {
	if err := p.w.Close(); err != nil {
		p.fail(err)
	}
}

// redo returns the batch that applies r to a tree in state st (st.Size ==
// r.start): leaf hashes and nodes recomputed from r's entries, which must
// end in r's compact range.
func redo(st log.State, r record) (*log.Batch, error) {
	rng, err := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, st.Size, cloneHashes(st.Range))
	if err != nil {
		return nil, fmt.Errorf("%w: compact range of size %d: %w", ErrCorrupt, st.Size, err)
	}
	b := &log.Batch{Start: r.start, Entries: r.entries, State: log.State{Size: r.size, Range: r.rng, Checkpoint: r.cp}}
	for _, e := range r.entries {
		lh := log.LeafHash(e)
		b.LeafHashes = append(b.LeafHashes, lh)
		if err := rng.Append(lh, func(id compact.NodeID, h []byte) {
			b.Nodes = append(b.Nodes, log.Node{ID: id, Hash: h})
		}); err != nil {
			return nil, err
		}
	}
	got := rng.Hashes()
	if len(got) != len(r.rng) {
		return nil, fmt.Errorf("%w: the published record of batch [%d, %d) does not extend the stored tree", ErrCorrupt, r.start, r.size)
	}
	for i := range got {
		if !bytes.Equal(got[i], r.rng[i]) {
			return nil, fmt.Errorf("%w: the published record of batch [%d, %d) does not extend the stored tree", ErrCorrupt, r.start, r.size)
		}
	}
	if err := b.Check(st.Size); err != nil {
		return nil, fmt.Errorf("%w: the published record of batch [%d, %d): %w", ErrCorrupt, r.start, r.size, err)
	}
	return b, nil
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
)

// The age index outlives a restart: the sidecar saves it in the data dir
// (retentionIndexFile) after each background purge and when it stops,
// and the next start reads on from where it ends instead of rereading the
// whole log. It is derived from the log, so a missing, damaged or foreign
// file costs one full read, nothing more; it is never trusted beyond what
// it can show: its checksum must hold, and the log must still hold, at
// the index's end, the entry whose leaf hash it recorded (a different or
// rewritten log gets a new index).
//
// The file, all integers big-endian:
//
//	"provlog retention index v2\n"
//	next      uint64    entries [0, next) are in it
//	leaf      [32]byte  the leaf hash of entry next-1 (zeros when next is 0)
//	count     uint64
//	count ×   blob [32]byte, oldest int64, newest int64 (Unix ns), flags byte
//	          (1: a purge entry names the blob after every entry naming it)
//	sum       [32]byte  SHA-256 of all the above

// retentionIndexFile is the saved age index (see retention_idx.go).
const retentionIndexFile = "retention.idx"

// Version 1 had no flags: a v1 file is refused, and costs one full read.
const ageIndexMagic = "provlog retention index v2\n"

// ageRecord is the size of one blob's record.
const ageRecord = 32 + 8 + 8 + 1

// entryReader reads entries, as log.Storage does.
type entryReader interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}

// marshal returns x's file form, whose end is the entry with leaf hash
// leaf; it fails if a blob name is not a hex SHA-256.
func (x *ageIndex) marshal(leaf []byte) ([]byte, error) {
	b := make([]byte, 0, len(ageIndexMagic)+8+32+8+len(x.ages)*ageRecord+32)
	b = append(b, ageIndexMagic...)
	b = binary.BigEndian.AppendUint64(b, x.next)
	b = append(b, leaf...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(x.ages)))
	for s, a := range x.ages {
		sum, err := hex.DecodeString(s)
		if err != nil || len(sum) != 32 {
			return nil, fmt.Errorf("blob name %q is not a hex SHA-256", s)
		}
		b = append(b, sum...)
		b = binary.BigEndian.AppendUint64(b, uint64(a.oldest))
		b = binary.BigEndian.AppendUint64(b, uint64(a.newest))
		var flags byte
		if a.purged {
			flags = 1
		}
		b = append(b, flags)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// parseAgeIndex reads an index's file form and returns it and the leaf
// hash of its last entry.
func parseAgeIndex(b []byte) (*ageIndex, []byte, error) {
	head := len(ageIndexMagic) + 8 + 32 + 8
	if len(b) < head+32 || !bytes.HasPrefix(b, []byte(ageIndexMagic)) {
		return nil, nil, errors.New("not a retention index")
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, nil, errors.New("its checksum does not match: the file is damaged")
	}
	p := body[len(ageIndexMagic):]
	x := &ageIndex{next: binary.BigEndian.Uint64(p)}
	leaf := bytes.Clone(p[8:40])
	count := binary.BigEndian.Uint64(p[40:48])
	p = p[48:]
	if uint64(len(p))%ageRecord != 0 || uint64(len(p))/ageRecord != count {
		return nil, nil, fmt.Errorf("it says %d blobs but holds %d bytes of them", count, len(p))
	}
	x.ages = make(map[string]blobAge, count)
	for ; len(p) > 0; p = p[ageRecord:] {
		s := hex.EncodeToString(p[:32])
		if _, dup := x.ages[s]; dup {
			return nil, nil, fmt.Errorf("blob %s is in it twice", s)
		}
		if p[48] > 1 {
			return nil, nil, fmt.Errorf("blob %s has flags %d", s, p[48])
		}
		x.ages[s] = blobAge{int64(binary.BigEndian.Uint64(p[32:40])), int64(binary.BigEndian.Uint64(p[40:48])), p[48] == 1}
	}
	return x, leaf, nil
}

// lastLeaf is the leaf hash of entry n-1 of src (zeros for n = 0).
func lastLeaf(ctx context.Context, src entryReader, n uint64) ([]byte, error) {
	if n == 0 {
		return make([]byte, 32), nil
	}
	es, err := src.Entries(ctx, n-1, n)
	if err != nil {
		return nil, err
	}
	if len(es) != 1 {
		return nil, fmt.Errorf("the log has no entry %d", n-1)
	}
	return log.LeafHash(es[0]), nil
}

// save writes x to path (durably and atomically: a crash leaves the old
// file or the new). The caller holds x.mu.
func (x *ageIndex) save(ctx context.Context, path string, src entryReader) error {
	leaf, err := lastLeaf(ctx, src, x.next)
	if err != nil {
		return fmt.Errorf("saving the retention index: %w", err)
	}
	b, err := x.marshal(leaf)
	if err != nil {
		return fmt.Errorf("saving the retention index: %w", err)
	}
	if err := durable.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("saving the retention index: %w", err)
	}
	return nil
}

// load replaces x (empty) with the index saved at path, if it is whole
// and its last entry is src's entry there; size is the log's size. It
// returns an error saying why not (x stays empty: the next purge by age
// reads the whole log), or nil when there was none to load.
func (x *ageIndex) load(ctx context.Context, path string, src entryReader, size uint64) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the retention index: %w", err)
	}
	y, leaf, err := parseAgeIndex(b)
	if err != nil {
		return fmt.Errorf("retention index %s: %w", path, err)
	}
	if y.next > size {
		return fmt.Errorf("retention index %s covers %d entries, but the log holds %d", path, y.next, size)
	}
	have, err := lastLeaf(ctx, src, y.next)
	if err != nil {
		return fmt.Errorf("retention index %s: %w", path, err)
	}
	if !bytes.Equal(have, leaf) {
		return fmt.Errorf("retention index %s was made from another log: entry %d differs", path, y.next-1)
	}
	x.next, x.ages = y.next, y.ages
	return nil
}

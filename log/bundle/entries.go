package bundle

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/provlog/provlog/log"
)

// Entries are a verified bundle's entries by log index, as a log.Storage's
// Entries gives them, read from the provenance.jsonl [VerifyEntries]
// opened and verified: the file is opened once. Each entry read is held
// to the leaf hash the check took of it, so bytes changed in the file
// since (written over in place) are an error, never an entry. Memory is
// 40 bytes an entry whatever their size.
type Entries struct {
	f      *os.File
	from   uint64
	offs   []int64 // where entry from+i starts; the last is the end of the last
	leaves []byte  // entry from+i's leaf hash at [32i, 32i+32)
}

// VerifyEntries is [VerifyPinned], and gives the verified entries too;
// the caller closes them. On an error there are none.
func VerifyEntries(ctx context.Context, dir string, verifyAnchor VerifyAnchorFunc, pins Pins) (*Report, *Entries, error) {
	es := &Entries{offs: []int64{0}}
	rep, err := verify(ctx, dir, verifyAnchor, pins, es)
	if err != nil || es.f == nil {
		es.Close()
		if err == nil {
			err = fmt.Errorf("bundle: %s was not verified", EntriesFile)
		}
		return nil, nil, err
	}
	es.from = rep.Manifest.From
	return rep, es, nil
}

// IndexEntries indexes f, a bundle's provenance.jsonl whose first line is
// entry from, as [Entries], reading it once line by line, and without
// verifying it: for a reader that shows a bundle and leaves vouching for
// it to another check (provlog view, whose page verifies what it is
// served). Memory is 40 bytes an entry. A line longer than an entry may
// be, or a last line without its newline, is an error. It closes f on an
// error; the caller closes the entries.
func IndexEntries(f *os.File, from uint64) (*Entries, error) {
	es := &Entries{f: f, from: from, offs: []int64{0}}
	br := bufio.NewReaderSize(f, entryLineBytes)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			err = fmt.Errorf("%s: line %d is longer than an entry may be", EntriesFile, n)
		case len(line) == 0 && errors.Is(err, io.EOF):
			return es, nil
		case err != nil && !errors.Is(err, io.EOF):
			err = fmt.Errorf("reading %s: %w", EntriesFile, err)
		case !bytes.HasSuffix(line, []byte("\n")):
			err = fmt.Errorf("%s: line %d does not end in a newline", EntriesFile, n)
		default:
			es.add(line)
			continue
		}
		f.Close()
		return nil, err
	}
}

// Leaves are the entries' leaf hashes, 32 bytes each in index order from
// [Entries.From], as they were read. The caller does not change them.
func (es *Entries) Leaves() []byte { return es.leaves }

// Find returns the index of the last entry whose leaf hash is leaf.
func (es *Entries) Find(leaf []byte) (uint64, bool) {
	for k := len(es.leaves)/log.HashSize - 1; k >= 0; k-- {
		if bytes.Equal(es.leaves[log.HashSize*k:log.HashSize*(k+1)], leaf) {
			return es.from + uint64(k), true
		}
	}
	return 0, false
}

// add notes the next entry's line, as the check read it.
func (es *Entries) add(line []byte) {
	if es == nil {
		return
	}
	es.offs = append(es.offs, es.offs[len(es.offs)-1]+int64(len(line)))
	es.leaves = append(es.leaves, log.LeafHash(line[:len(line)-1])...)
}

// hold keeps f, the entries file the check read, when the entries gave
// the checkpoint's root and the caller wants them; it closes f otherwise.
func (es *Entries) hold(f *os.File, ok bool) {
	if es == nil || !ok {
		f.Close()
		return
	}
	es.f = f
}

// Close closes the entries file.
func (es *Entries) Close() error {
	if es == nil || es.f == nil {
		return nil
	}
	return es.f.Close()
}

// From is the index of the bundle's first entry; End the index after its
// last.
func (es *Entries) From() uint64 { return es.from }
func (es *Entries) End() uint64  { return es.from + uint64(len(es.offs)-1) }

// Entries returns the entries [start, end); one outside the bundle's range
// is not found (log.ErrNotFound).
func (es *Entries) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	if start < es.from || end > es.End() || start > end {
		return nil, fmt.Errorf("entries [%d, %d): the bundle holds [%d, %d): %w", start, end, es.from, es.End(), log.ErrNotFound)
	}
	lo, hi := es.offs[start-es.from], es.offs[end-es.from]
	buf := make([]byte, hi-lo)
	if _, err := es.f.ReadAt(buf, lo); err != nil {
		return nil, fmt.Errorf("reading entries [%d, %d) of %s: %w", start, end, EntriesFile, err)
	}
	out := make([][]byte, 0, end-start)
	for i := start; i < end; i++ {
		k := i - es.from
		l := es.offs[k+1] - es.offs[k]
		b := buf[:l-1]
		if !bytes.Equal(log.LeafHash(b), es.leaves[32*k:32*k+32]) {
			return nil, fmt.Errorf("%s changed after it was verified: entry %d is not the one verified", EntriesFile, i)
		}
		out = append(out, b)
		buf = buf[l:]
	}
	return out, nil
}

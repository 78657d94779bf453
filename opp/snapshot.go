package opp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
)

// A snapshot of the task index lets a restart skip replaying the log: it
// is the index (index.go) as it was after the entries [0, size), bound to
// the log by the leaf hash of entry size-1. Open loads it if it is whole
// (a SHA-256 trailer) and the log still holds that entry, then replays
// only the entries after it; anything else (no file, a torn or foreign
// one, a log that no longer matches) means a full replay, so a snapshot
// can make a restart fast but never change what the state is. It is a
// cache of what the log says, kept in the data dir like the log's keys.
//
// Layout (little endian): the magic line; size u64; leaf hash [32]; tasks
// u32; links u32; then per task its id [16], per task its head (first
// link u32, last link u32, state u8), per link its log index u64, per link its
// previous link u32; the violations as JSON, length u32 first; the calls
// without a call.result (calls.go): count u32, then each one's log index
// u64; the calls whose call.result failed (succeeded.go): count u64, then
// each one's log index u64, ascending; the calls observed claims cite
// (onetask.go): count u32, then, in
// order of log index, each one's log index u64 and task u32 (or
// manyTasks); and the SHA-256 of everything before it. A v3 snapshot,
// without the cited calls, is not loaded: the log is replayed once.
const snapshotMagic = "provlog task index v4\n"

// SaveIndex closes the engine to writes (operations under way finish
// first; later ones are refused) and writes a snapshot of the task index
// to [Options.IndexFile] (nothing if it is not set), for the next Open.
// Call it at shutdown, with size the log's size read after the last
// operation could have started; on a shared log the engine first reads
// what others wrote, and size is what it has read. Reads go on.
func (e *Engine) SaveIndex(ctx context.Context, size uint64) error {
	e.gate.Lock()
	defer e.gate.Unlock()
	e.closed = true
	if e.indexFile == "" {
		return nil
	}
	if err := e.Err(); err != nil {
		// The state may be behind the log; an older snapshot is still
		// a true prefix.
		return fmt.Errorf("not saving the task index: %w", err)
	}
	if e.shared != nil {
		n, err := e.catchUp(ctx)
		if err != nil {
			return err
		}
		e.shared.mu.Lock()
		defer e.shared.mu.Unlock()
		size = n
	}
	if err := e.tasks.calls.follow(ctx, e.log, size); err != nil {
		return fmt.Errorf("saving the task index: %w", err)
	}
	seen, open, fails := e.tasks.calls.state()
	if seen != size {
		return fmt.Errorf("not saving the task index: its calls were read up to entry %d, past the log's size %d", seen, size)
	}
	var leaf [32]byte
	if size > 0 {
		b, err := e.tasks.reader(ctx).entry(size - 1)
		if err != nil {
			return fmt.Errorf("saving the task index: reading entry %d: %w", size-1, err)
		}
		leaf = [32]byte(log.LeafHash(b))
	}
	e.tasks.mu.Lock()
	defer e.tasks.mu.Unlock()
	return writeSnapshot(e.indexFile, size, leaf, e.tasks.idx, e.tasks.violations, open, fails, e.tasks.observed)
}

func writeSnapshot(path string, size uint64, leaf [32]byte, x *index, violations []Violation, open, fails []uint64, observed map[uint64]uint32) error {
	vj, err := json.Marshal(violations)
	if err != nil {
		return err
	}
	err = durable.WriteFileFunc(path, 0o600, func(f io.Writer) error {
		h := sha256.New()
		w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<16)
		le := binary.LittleEndian
		var b [32]byte
		w.WriteString(snapshotMagic)
		w.Write(le.AppendUint64(b[:0], size))
		w.Write(leaf[:])
		w.Write(le.AppendUint32(b[:0], x.heads.len()))
		w.Write(le.AppendUint32(b[:0], x.at.len()))
		for n := range x.heads.len() {
			w.Write(x.keys.at(n)[:])
		}
		for n := range x.heads.len() {
			hd := x.heads.at(n)
			p := le.AppendUint32(b[:0], hd.first)
			p = le.AppendUint32(p, hd.last)
			w.Write(append(p, hd.state))
		}
		for l := range x.at.len() {
			w.Write(le.AppendUint64(b[:0], x.at.at(l).index()))
		}
		for l := range x.at.len() {
			w.Write(le.AppendUint32(b[:0], *x.prev.at(l)))
		}
		w.Write(le.AppendUint32(b[:0], uint32(len(vj))))
		w.Write(vj)
		w.Write(le.AppendUint32(b[:0], uint32(len(open))))
		for _, i := range open {
			w.Write(le.AppendUint64(b[:0], i))
		}
		w.Write(le.AppendUint64(b[:0], uint64(len(fails))))
		for _, i := range fails {
			w.Write(le.AppendUint64(b[:0], i))
		}
		w.Write(le.AppendUint32(b[:0], uint32(len(observed))))
		for _, c := range slices.Sorted(maps.Keys(observed)) {
			w.Write(le.AppendUint32(le.AppendUint64(b[:0], c), observed[c]))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		_, err := f.Write(h.Sum(nil))
		return err
	})
	if err != nil {
		return fmt.Errorf("saving the task index: %w", err)
	}
	return nil
}

// errNoSnapshot: there is no snapshot file.
var errNoSnapshot = errors.New("no saved task index")

// loadSnapshot loads the snapshot at path into s (empty) if it is whole
// and the log of size holds what it was made from, and returns the size
// it covers. On an error s is left empty.
func (s *taskSet) loadSnapshot(ctx context.Context, path string, size uint64) (uint64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, errNoSnapshot
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() < sha256.Size {
		return 0, errors.New("the file is too short")
	}
	h := sha256.New()
	body := st.Size() - sha256.Size
	rd := &snapReader{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, body), h), 1<<16), left: body}
	at, err := s.readSnapshot(rd, size)
	if err != nil {
		return 0, err
	}
	var sum [sha256.Size]byte
	if _, err := io.ReadFull(f, sum[:]); err != nil || !bytes.Equal(sum[:], h.Sum(nil)) {
		return 0, errors.New("its checksum does not match (a torn or changed file)")
	}
	if at.size > size {
		return 0, fmt.Errorf("it covers %d entries, more than the log's %d", at.size, size)
	}
	if at.size > 0 {
		b, err := s.reader(ctx).entry(at.size - 1)
		if err != nil {
			return 0, fmt.Errorf("reading entry %d: %w", at.size-1, err)
		}
		if [32]byte(log.LeafHash(b)) != at.leaf {
			return 0, fmt.Errorf("entry %d of the log is not the one it was made after (another log?)", at.size-1)
		}
	}
	if err := s.calls.restore(s.reader(ctx), at.size, at.open, at.fails); err != nil {
		return 0, err
	}
	return at.size, nil
}

type snapHead struct {
	size  uint64
	leaf  [32]byte
	open  []uint64 // the calls without a result
	fails []uint64 // the calls whose result failed
}

// readSnapshot reads the body of a snapshot into s's index.
func (s *taskSet) readSnapshot(rd *snapReader, max uint64) (snapHead, error) {
	var hd snapHead
	if string(rd.bytes(len(snapshotMagic))) != snapshotMagic {
		return hd, errors.New("it is not a task index snapshot of this version")
	}
	hd.size = rd.u64()
	copy(hd.leaf[:], rd.bytes(32))
	tasks, links := rd.u32(), rd.u32()
	if rd.err == nil && (uint64(tasks) > max || uint64(links) > max || tasks > links) {
		return hd, fmt.Errorf("it counts %d tasks and %d entries, impossible in a log of %d", tasks, links, max)
	}
	x := s.idx
	for n := uint32(0); n < tasks && rd.err == nil; n++ {
		k := taskKey(rd.bytes(16))
		if _, dup := x.ids.find(k, &x.keys); dup {
			return hd, fmt.Errorf("task %d's id is there twice", n)
		}
		if _, err := x.keys.add(k); err != nil {
			return hd, err
		}
		if err := x.ids.insert(n, &x.keys); err != nil {
			return hd, err
		}
	}
	for n := uint32(0); n < tasks && rd.err == nil; n++ {
		h := head{first: rd.u32(), last: rd.u32(), state: rd.bytes(1)[0]}
		if h.first >= links || h.last >= links || h.first > h.last || h.state < 1 || h.state > 4 {
			return hd, fmt.Errorf("task %d's head is out of range", n)
		}
		x.heads.add(h)
	}
	for l := uint32(0); l < links && rd.err == nil; l++ {
		i := rd.u64()
		if i >= maxPos {
			return hd, fmt.Errorf("entry link %d names log index %d, past 2^40", l, i)
		}
		x.at.add(posOf(i))
	}
	for l := uint32(0); l < links && rd.err == nil; l++ {
		p := rd.u32()
		if p != noLink && p >= l {
			return hd, fmt.Errorf("entry link %d points forward", l)
		}
		x.prev.add(p)
	}
	for n := uint32(0); n < tasks && rd.err == nil; n++ {
		if *x.prev.at(x.heads.at(n).first) != noLink {
			return hd, fmt.Errorf("task %d's first entry link %d has a previous one", n, x.heads.at(n).first)
		}
	}
	vj := rd.bytes(int(rd.u32()))
	if rd.err != nil {
		return hd, rd.err
	}
	if err := json.Unmarshal(vj, &s.violations); err != nil {
		return hd, fmt.Errorf("its violations do not decode: %v", err)
	}
	var err error
	if hd.open, err = rd.ascending(uint64(rd.u32()), hd.size, "calls without a result"); err != nil {
		return hd, err
	}
	if hd.fails, err = rd.ascending(rd.u64(), hd.size, "failed calls"); err != nil {
		return hd, err
	}
	n := rd.u32()
	if rd.err == nil && uint64(n) > hd.size {
		return hd, fmt.Errorf("it counts %d calls cited by observed claims, more than its %d entries", n, hd.size)
	}
	if n > 0 && rd.err == nil {
		s.observed = make(map[uint64]uint32, n)
	}
	last := uint64(0)
	for k := uint32(0); k < n && rd.err == nil; k++ {
		c, m := rd.u64(), rd.u32()
		if c >= hd.size || k > 0 && c <= last || m >= tasks && m != manyTasks {
			return hd, fmt.Errorf("its calls cited by observed claims are out of order or range (%d, task %d)", c, m)
		}
		s.observed[c], last = m, c
	}
	return hd, rd.err
}

// ascending reads n entry indices, each below size and each above the
// one before (what names them in an error).
func (r *snapReader) ascending(n, size uint64, what string) ([]uint64, error) {
	if r.err == nil && n > size {
		return nil, fmt.Errorf("it counts %d %s, more than its %d entries", n, what, size)
	}
	var out []uint64
	for k := uint64(0); k < n && r.err == nil; k++ {
		i := r.u64()
		if i >= size || k > 0 && i <= out[k-1] {
			return nil, fmt.Errorf("its %s are out of order or range (%d)", what, i)
		}
		out = append(out, i)
	}
	return out, nil
}

// snapReader reads fixed-size fields, keeping the first error.
type snapReader struct {
	r    *bufio.Reader
	left int64 // bytes the file has left
	err  error
	buf  [32]byte
}

func (r *snapReader) bytes(n int) []byte {
	if int64(n) > r.left && r.err == nil {
		r.err = errors.New("the file ends early")
	}
	if r.err != nil {
		return r.buf[:min(n, len(r.buf))]
	}
	r.left -= int64(n)
	b := r.buf[:0]
	if n > len(r.buf) {
		b = make([]byte, n)
	}
	b = b[:n]
	if r.err == nil {
		if _, err := io.ReadFull(r.r, b); err != nil {
			r.err = errors.New("the file ends early")
		}
	}
	return b
}

func (r *snapReader) u64() uint64 { return binary.LittleEndian.Uint64(r.bytes(8)) }
func (r *snapReader) u32() uint32 { return binary.LittleEndian.Uint32(r.bytes(4)) }

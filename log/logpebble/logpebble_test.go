package logpebble

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/hot"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/pebbleguard"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

func TestStorage(t *testing.T) {
	// The suite's logs are small enough for the default to keep all levels
	// but the leaves in memory; also run it with none and with a few. Its
	// logs fit in one chunk of the leaf-hash index; also run it with
	// chunks of 16 entries.
	for _, hot := range []struct {
		name  string
		max   *uint64
		chunk uint
	}{{"default", nil, 0}, {"nohot", ptr[uint64](0), 0}, {"hot=40", ptr[uint64](40), 0}, {"chunks=16", nil, 4}} {
		t.Run(hot.name, func(t *testing.T) {
			logtest.TestStorage(t, func(t *testing.T) (log.Storage, func() log.Storage) {
				dir := t.TempDir()
				open := func() log.Storage {
					s, err := Open(dir, &Options{Logf: t.Logf, testingOnlyMaxHotNodes: hot.max, testingOnlyChunkBits: hot.chunk})
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					return s
				}
				return open(), open
			})
		})
	}
}

func ptr[T any](v T) *T { return &v }

// appender builds batches the way a sequencer does.
type appender struct {
	rf *compact.RangeFactory
	cr *compact.Range
}

func newAppender() *appender {
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	return &appender{rf: rf, cr: rf.NewEmptyRange(0)}
}

func (a *appender) batch(entries [][]byte) *log.Batch {
	b := &log.Batch{Start: a.cr.End(), Entries: entries}
	visit := func(id compact.NodeID, hash []byte) {
		b.Nodes = append(b.Nodes, log.Node{ID: id, Hash: bytes.Clone(hash)})
	}
	for _, e := range entries {
		h := rfc6962.DefaultHasher.HashLeaf(e)
		b.LeafHashes = append(b.LeafHashes, h)
		if err := a.cr.Append(h, visit); err != nil {
			panic(err)
		}
	}
	root, _ := a.cr.GetRootHash(nil)
	b.State = log.State{Size: a.cr.End(), Range: cloneHashes(a.cr.Hashes()), Checkpoint: fmt.Appendf(nil, "cp %d %x", a.cr.End(), root)}
	return b
}

// fill commits n batches of entries of the given size.
func fill(tb testing.TB, s *Store, a *appender, batches, perBatch, entrySize int) {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for range batches {
		es := make([][]byte, perBatch)
		for i := range es {
			e := make([]byte, entrySize)
			for j := 0; j < len(e); j += 8 {
				v := r.Uint64()
				for k := 0; k < 8 && j+k < len(e); k++ {
					e[j+k] = byte(v >> (8 * k))
				}
			}
			es[i] = e
		}
		if err := s.Commit(context.Background(), a.batch(es)); err != nil {
			tb.Fatalf("Commit: %v", err)
		}
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, nil)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("second Open: error %q does not name the directory", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s.Close()
}

// TestLockedByOtherProcess holds the store in a child process, as a running
// sidecar would, and opens it here.
func TestLockedByOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "LOGPEBBLE_HOLD_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("child said %q, %v; want holding", line, err)
	}

	_, err = Open(dir, nil)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("Open while another process holds the store: err = %v, want ErrLocked", err)
	} else {
		t.Logf("Open: %v", err)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after the other process exited: %v", err)
	}
	s.Close()
}

func TestHelperHoldLock(t *testing.T) {
	dir := os.Getenv("LOGPEBBLE_HOLD_DIR")
	if dir == "" {
		t.Skip("helper process for TestLockedByOtherProcess")
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// openRaw opens the store's Pebble database directly, as an attacker or a
// broken disk would change it.
func openRaw(t *testing.T, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{
		FormatMajorVersion: formatMajorVersion,
		Logger:             pebbleguard.Logger{Logf: t.Logf},
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// editState replaces the stored state by edit of a copy of it.
func editState(t *testing.T, db *pebble.DB, edit func(v []byte) []byte) {
	t.Helper()
	v, c, err := db.Get(stateKey)
	must(t, err)
	v = bytes.Clone(v)
	c.Close()
	must(t, db.Set(stateKey, edit(v), nil))
}

func TestOpenCorrupt(t *testing.T) {
	const size = 300 // three batches of 100
	tests := []struct {
		name   string
		change func(t *testing.T, db *pebble.DB)
	}{
		{"last entry deleted", func(t *testing.T, db *pebble.DB) { must(t, db.Delete(entryKey(size-1), nil)) }},
		{"entry past the size", func(t *testing.T, db *pebble.DB) { must(t, db.Set(entryKey(size), []byte("x"), nil)) }},
		{"last leaf hash deleted", func(t *testing.T, db *pebble.DB) {
			must(t, db.Delete(nodeKey(compact.NewNodeID(0, size-1)), nil))
		}},
		{"compact range node changed", func(t *testing.T, db *pebble.DB) {
			id := compact.RangeNodes(0, size, nil)[0]
			must(t, db.Set(nodeKey(id), make([]byte, hashSize), nil))
		}},
		{"compact range node deleted", func(t *testing.T, db *pebble.DB) {
			id := compact.RangeNodes(0, size, nil)[1]
			must(t, db.Delete(nodeKey(id), nil))
		}},
		{"checkpoint deleted", func(t *testing.T, db *pebble.DB) { must(t, db.Delete(checkpointKey(size), nil)) }},
		{"checkpoint past the size", func(t *testing.T, db *pebble.DB) {
			must(t, db.Set(checkpointKey(size+100), []byte("cp"), nil))
		}},
		{"state deleted", func(t *testing.T, db *pebble.DB) { must(t, db.Delete(stateKey, nil)) }},
		{"state truncated", func(t *testing.T, db *pebble.DB) {
			editState(t, db, func(v []byte) []byte { return v[:len(v)-1] })
		}},
		{"state of version 0", func(t *testing.T, db *pebble.DB) {
			editState(t, db, func(v []byte) []byte { v[0] = 0; return v })
		}},
		{"state names a first chunked index past its size", func(t *testing.T, db *pebble.DB) {
			editState(t, db, func(v []byte) []byte { binary.BigEndian.PutUint64(v[9:17], size+1); return v })
		}},
		{"state names chunks of 2^0 entries", func(t *testing.T, db *pebble.DB) {
			editState(t, db, func(v []byte) []byte { v[17] = 0; return v })
		}},
		{"state rolled back one batch", func(t *testing.T, db *pebble.DB) {
			a := newAppender()
			var b *log.Batch
			for range 2 {
				b = a.batch(make([][]byte, 100))
			}
			must(t, db.Set(stateKey, encodeState(b.State.Size, chunkIndex{bits: chunkBits}, b.State.Range), nil))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, nil)
			must(t, err)
			a := newAppender()
			for range 3 {
				must(t, s.Commit(t.Context(), a.batch(make([][]byte, 100))))
			}
			must(t, s.Close())

			db := openRaw(t, dir)
			tt.change(t, db)
			must(t, db.Close())

			s, err = Open(dir, nil)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want ErrCorrupt")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: err = %v, want ErrCorrupt", err)
			}
			t.Logf("Open: %v", err)
		})
	}
}

// TestCorruptTable damages the bytes of Pebble's tables on disk: the whole
// table, which Open notices, and only the middle of the table, where the
// entries' data blocks are, which a full read notices and which must stop
// commits.
func TestCorruptTable(t *testing.T) {
	for _, tt := range []struct {
		name     string
		from, to float64 // fractions of the table's length
	}{
		{"whole", 0, 1},
		{"middle", 0.3, 0.6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, nil)
			must(t, err)
			a := newAppender()
			fill(t, s, a, 4, 64, 1024)
			must(t, s.Close())
			db := openRaw(t, dir)
			must(t, db.Flush())
			must(t, db.Close())

			tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
			must(t, err)
			if len(tables) == 0 {
				t.Fatal("no tables after Flush")
			}
			for _, name := range tables {
				data, err := os.ReadFile(name)
				must(t, err)
				for i := int(float64(len(data)) * tt.from); i < int(float64(len(data))*tt.to); i += 97 {
					data[i] ^= 0x55
				}
				must(t, os.WriteFile(name, data, 0o600))
			}

			var logged syncBuffer
			s, err = Open(dir, &Options{Logf: logged.logf})
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: err = %v, want ErrCorrupt", err)
				}
				t.Logf("Open: %v", err)
				return
			}
			defer s.Close()
			if tt.from == 0 {
				t.Fatalf("Open of a store whose tables are garbage succeeded, want ErrCorrupt")
			}
			_, err = s.Entries(t.Context(), 0, 256)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Entries: err = %v, want ErrCorrupt", err)
			}
			t.Logf("Entries: %v", err)
			err = s.Commit(t.Context(), a.batch([][]byte{[]byte("after")}))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Commit after corruption: err = %v, want ErrCorrupt", err)
			}
			t.Logf("Commit: %v", err)
		})
	}
}

// TestCorruptionFailsClosed reports corruption the way Pebble does while
// the store is open: commits must stop, reads of what is intact go on.
func TestCorruptionFailsClosed(t *testing.T) {
	var logged syncBuffer
	s, err := Open(t.TempDir(), &Options{Logf: logged.logf})
	must(t, err)
	defer s.Close()
	a := newAppender()
	must(t, s.Commit(t.Context(), a.batch([][]byte{[]byte("one")})))

	s.eventListener(s.fs).DataCorruption(pebble.DataCorruptionInfo{Path: "000042.sst", Details: errors.New("checksum mismatch")})
	err = s.Commit(t.Context(), a.batch([][]byte{[]byte("two")}))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Commit after corruption: err = %v, want ErrCorrupt", err)
	}
	if es, err := s.Entries(t.Context(), 0, 1); err != nil || string(es[0]) != "one" {
		t.Fatalf("Entries after corruption = %q, %v", es, err)
	}
	if !strings.Contains(logged.String(), "000042.sst") {
		t.Errorf("Logf got %q, want the corruption report", logged.String())
	}
}

func TestReadNodesOrder(t *testing.T) {
	// ReadNodes sorts ids to read them in key order; the answer must come
	// back in the caller's order, repeated ids included. Keep no level in
	// memory, so that all come from Pebble.
	s, err := Open(t.TempDir(), &Options{testingOnlyMaxHotNodes: ptr[uint64](0)})
	must(t, err)
	defer s.Close()
	a := newAppender()
	var nodes []log.Node
	for range 4 {
		b := a.batch(make([][]byte, 300))
		nodes = append(nodes, b.Nodes...)
		must(t, s.Commit(t.Context(), b))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		var ids []compact.NodeID
		var want [][]byte
		for range r.IntN(300) {
			n := nodes[r.IntN(len(nodes))]
			ids = append(ids, n.ID)
			want = append(want, n.Hash)
		}
		// Some runs of consecutive leaves, as tiles are read.
		if len(ids) > 0 {
			start := r.Uint64N(900)
			for i := start; i < start+256 && i < 1200; i++ {
				ids = append(ids, compact.NewNodeID(0, i))
				want = append(want, nodes0(nodes, i))
			}
		}
		got, err := s.ReadNodes(t.Context(), ids)
		must(t, err)
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("ReadNodes(%v)[%d] = %x, want %x", ids, i, got[i], want[i])
			}
		}
	}
}

func nodes0(nodes []log.Node, index uint64) []byte {
	for _, n := range nodes {
		if n.ID == compact.NewNodeID(0, index) {
			return n.Hash
		}
	}
	panic("no leaf")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(&b.b, format+"\n", args...)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// BenchmarkCommit commits batches of 1 KiB entries, each synced to disk.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s, err := Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			a := newAppender()
			entry := make([]byte, 1024)
			for i := range entry {
				entry[i] = byte(i * 7)
			}
			i := uint64(0)
			ctx := context.Background()
			start := time.Now()
			for b.Loop() {
				es := make([][]byte, n)
				for j := range es {
					e := bytes.Clone(entry)
					e[0], e[1], e[2], e[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
					i++
					es[j] = e
				}
				if err := s.Commit(ctx, a.batch(es)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(i)/time.Since(start).Seconds(), "entries/s")
		})
	}
}

// readNodesGet is the alternative to ReadNodes' single iterator: one Get
// per node not held in memory. BenchmarkReadNodes compares the two.
func (s *Store) readNodesGet(ids []compact.NodeID) ([][]byte, error) {
	st, err := s.acquire(context.Background())
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	out := make([][]byte, len(ids))
	slab := make([]byte, hashSize*len(ids))
	key := make([]byte, 0, 10)
	for i, id := range ids {
		out[i] = slab[i*hashSize : (i+1)*hashSize : (i+1)*hashSize]
		if st.hot.Read(id, out[i]) {
			continue
		}
		v, closer, err := s.db.Get(appendNodeKey(key[:0], id))
		if err != nil {
			return nil, err
		}
		copy(out[i], v)
		closer.Close()
	}
	return out, nil
}

// setHot replaces the nodes s keeps in memory, returning the old ones.
func (s *Store) setHot(h *hot.Nodes) *hot.Nodes {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.hot
	s.hot = h
	return old
}

// BenchmarkReadNodes serves verified inclusion proofs and tile reads from a
// log of 200,000 entries of 1 KiB, reading nodes with one iterator per call
// (ReadNodes, "iter") or one Get per node ("get"), with the upper levels of
// the tree in memory (as Store does) or not ("-nohot").
func BenchmarkReadNodes(b *testing.B) {
	const batches, perBatch = 782, 256 // 200,192 entries
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s, newAppender(), batches, perBatch, 1024)
	// Let compactions catch up, as they do on a log serving more reads
	// than writes.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m := s.db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.EstimatedDebt == 0 {
			break
		}
	}
	st, err := s.State(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr, err := rf.NewRange(0, st.Size, st.Range)
	if err != nil {
		b.Fatal(err)
	}
	root, _ := cr.GetRootHash(nil)

	readers := map[string]func([]compact.NodeID) ([][]byte, error){
		"iter": func(ids []compact.NodeID) ([][]byte, error) { return s.ReadNodes(context.Background(), ids) },
		"get":  s.readNodesGet,
	}
	// prove reads the nodes of an inclusion proof and the leaf hash in one
	// call, rebuilds the proof and verifies it.
	prove := func(read func([]compact.NodeID) ([][]byte, error), index uint64) error {
		nodes, err := proof.Inclusion(index, st.Size)
		if err != nil {
			return err
		}
		ids := append(nodes.IDs, compact.NewNodeID(0, index))
		hashes, err := read(ids)
		if err != nil {
			return err
		}
		leaf := hashes[len(hashes)-1]
		p, err := nodes.Rehash(hashes[:len(hashes)-1], rfc6962.DefaultHasher.HashChildren)
		if err != nil {
			return err
		}
		return proof.VerifyInclusion(rfc6962.DefaultHasher, index, st.Size, leaf, p, root)
	}
	for _, name := range []string{"iter", "get", "iter-nohot", "get-nohot"} {
		read := readers[strings.TrimSuffix(name, "-nohot")]
		if strings.HasSuffix(name, "-nohot") {
			hot := s.setHot(hot.Empty(0))
			defer s.setHot(hot)
		}
		b.Run("proof/"+name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(5, 6))
			for b.Loop() {
				if err := prove(read, r.Uint64N(st.Size)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
		})
		b.Run("proof-parallel/"+name, func(b *testing.B) {
			var seed sync.Mutex
			n := uint64(0)
			b.RunParallel(func(pb *testing.PB) {
				seed.Lock()
				n++
				r := rand.New(rand.NewPCG(7, n))
				seed.Unlock()
				for pb.Next() {
					if err := prove(read, r.Uint64N(st.Size)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
		})
		if strings.HasSuffix(name, "-nohot") {
			continue // tiles are level 0, never held in memory
		}
		b.Run("tile/"+name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(8, 9))
			ids := make([]compact.NodeID, 256)
			for b.Loop() {
				tile := r.Uint64N(st.Size / 256)
				for i := range ids {
					ids[i] = compact.NewNodeID(0, tile*256+uint64(i))
				}
				if _, err := read(ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesspebble"
	"github.com/provlog/provlog/witness/witnesstest"
)

// benchTreeSize is the log the benchmarks prove over: a million entries.
const benchTreeSize = 1 << 20

// denseTree is every perfect node of a tree, level by level: what a log
// stores, in 64 MiB instead of a map's several hundred.
type denseTree struct {
	levels [][][32]byte
}

var benchTree = sync.OnceValue(func() *denseTree {
	t := &denseTree{}
	rf := &compact.RangeFactory{Hash: log.NodeHash}
	rng := rf.NewEmptyRange(0)
	for i := range benchTreeSize {
		leaf := log.LeafHash(fmt.Appendf(nil, `{"entry":%d}`, i))
		rng.Append(leaf, func(id compact.NodeID, h []byte) {
			for len(t.levels) <= int(id.Level) {
				t.levels = append(t.levels, nil)
			}
			t.levels[id.Level] = append(t.levels[id.Level], [32]byte(h))
		})
	}
	return t
})

func (t *denseTree) ReadNodes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		if int(id.Level) >= len(t.levels) || id.Index >= uint64(len(t.levels[id.Level])) {
			return nil, log.ErrNotFound
		}
		h := t.levels[id.Level][id.Index]
		out[i] = h[:]
	}
	return out, nil
}

// root returns the root hash at size n.
func (t *denseTree) root(n uint64) []byte {
	ids := compact.RangeNodes(0, n, nil)
	hs, err := t.ReadNodes(context.Background(), ids)
	if err != nil {
		panic(err)
	}
	r := hs[len(hs)-1]
	for i := len(hs) - 2; i >= 0; i-- {
		r = log.NodeHash(hs[i], r)
	}
	return r
}

// benchLog is one log's key and the requests that walk the witness through
// its checkpoints, each with a consistency proof over the million-entry
// tree.
type benchLog struct {
	origin string
	v      note.Verifier
	first  []byte   // the checkpoint the witness starts from
	reqs   [][]byte // request bodies
}

func newBenchLog(b *testing.B, origin string, n int) *benchLog {
	tree := benchTree()
	skey, vkey, _ := note.GenerateKey(rand.Reader, origin)
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	sign := func(size uint64) []byte {
		msg, err := note.Sign(&note.Note{Text: log.Checkpoint{Origin: origin, Size: size, Hash: tree.root(size)}.String()}, s)
		if err != nil {
			b.Fatal(err)
		}
		return msg
	}
	// Start half way and step through the second half of the tree.
	start := uint64(benchTreeSize / 2)
	step := max(1, uint64(benchTreeSize/2)/uint64(n+1))
	l := &benchLog{origin: origin, v: v, first: sign(start)}
	for i := range n {
		old, size := start+uint64(i)*step, start+uint64(i+1)*step
		p, err := log.ProveConsistency(context.Background(), tree, old, size)
		if err != nil {
			b.Fatal(err)
		}
		l.reqs = append(l.reqs, []byte((&witness.AddCheckpointRequest{OldSize: old, Proof: p, Checkpoint: sign(size)}).String()))
	}
	return l
}

func newBenchWitness(b *testing.B, logs []*benchLog) *Witness {
	kv, err := witnesspebble.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kv.Close() })
	return newBenchWitnessOn(b, logs, witness.KVStore(kv))
}

func newBenchWitnessOn(b *testing.B, logs []*benchLog, store witness.Store) *Witness {
	skey, _, _ := log.GenerateCosignerKey(rand.Reader, "witness.example/bench")
	cs, _ := log.ParseCosignerKey(skey)
	var ls []Log
	for _, l := range logs {
		ls = append(ls, Log{Origin: l.origin, Verifiers: []note.Verifier{l.v}})
		if err := store.Swap(context.Background(), l.origin, nil, l.first); err != nil {
			b.Fatal(err)
		}
	}
	w, err := New(Options{Signer: cs, Logs: ls, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkAddCheckpoint measures add-checkpoint requests per second on
// one witness whose state is in Pebble (every accepted checkpoint synced
// before the answer), with consistency proofs over a 1,048,576-entry log
// (19 to 20 hashes each):
//
//   - handler: the HTTP handler called directly, one log;
//   - handler/memory: the same with the state in memory (no fsync), to
//     show the CPU cost alone;
//   - http/logs=N: over loopback HTTP with keep-alive, N logs submitting
//     in parallel, each its own checkpoints in order (a log must wait for
//     its previous answer, so parallelism comes from many logs, and their
//     syncs share fsyncs).
func BenchmarkAddCheckpoint(b *testing.B) {
	benchTree()
	for _, mem := range []bool{false, true} {
		name := "handler"
		if mem {
			name += "/memory"
		}
		b.Run(name, func(b *testing.B) {
			l := newBenchLog(b, "log.example/bench", b.N)
			var w *Witness
			if mem {
				w = newBenchWitnessOn(b, []*benchLog{l}, witnesstest.NewStore())
			} else {
				w = newBenchWitness(b, []*benchLog{l})
			}
			b.ResetTimer()
			for i := range b.N {
				rec := httptest.NewRecorder()
				w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/add-checkpoint", bytes.NewReader(l.reqs[i])))
				if rec.Code != 200 {
					b.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
	for _, nlogs := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("http/logs=%d", nlogs), func(b *testing.B) {
			per := (b.N + nlogs - 1) / nlogs
			var logs []*benchLog
			for i := range nlogs {
				logs = append(logs, newBenchLog(b, fmt.Sprintf("log.example/bench%d", i), per))
			}
			w := newBenchWitness(b, logs)
			srv := httptest.NewServer(w)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: nlogs}
			hc := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, nlogs)
			for _, l := range logs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, body := range l.reqs {
						resp, err := hc.Post(srv.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
						if err != nil {
							errs <- err
							return
						}
						out, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || !strings.HasPrefix(string(out), "— witness.example/bench ") {
							errs <- fmt.Errorf("%d %s", resp.StatusCode, out)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per*nlogs)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
)

type getReader struct{ db *pebble.DB }

func (g getReader) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		k := binary.BigEndian.AppendUint64([]byte{'n', byte(id.Level)}, id.Index)
		v, c, err := g.db.Get(k)
		if err != nil {
			return nil, err
		}
		out[i] = append([]byte(nil), v...)
		c.Close()
	}
	return out, nil
}

func bench(name string, r log.NodeReader, size uint64, root []byte, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := rand.New(rand.NewPCG(uint64(w), 7))
			for range n / 2 {
				i := rr.Uint64N(size)
				p, err := log.ProveInclusion(ctx, r, i, size)
				if err != nil {
					panic(err)
				}
				lh, _ := r.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(0, i)})
				if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, lh[0], p, root); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	fmt.Printf("%-40s %d proofs in %v = %.0f/s\n", name, n, el.Round(time.Millisecond), float64(n)/el.Seconds())
}

func main() {
	dir := os.Args[1]
	mode := os.Args[2]
	ctx := context.Background()
	switch mode {
	case "store":
		for _, cs := range []int64{32 << 20, 256 << 20} {
			st, err := logpebble.Open(dir, &logpebble.Options{CacheSize: cs})
			if err != nil {
				panic(err)
			}
			s, _ := st.State(ctx)
			c, _ := log.ParseCheckpointNote(s.Checkpoint)
			for pass := range 2 {
				bench(fmt.Sprintf("store cache %dMiB pass %d", cs>>20, pass), st, s.Size, c.Hash, 40000)
			}
			st.Close()
		}
	case "get":
		for _, cs := range []int64{32 << 20, 256 << 20} {
			cache := pebble.NewCache(cs)
			po := &pebble.Options{Cache: cache, FormatMajorVersion: pebble.FormatValueSeparation}
			for i := range po.Levels {
				po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
			}
			db, err := pebble.Open(dir, po)
			if err != nil {
				panic(err)
			}
			fmt.Println(db.Metrics().String()[:0])
			st := getReader{db}
			v, cl, _ := db.Get([]byte{'s'})
			size := binary.BigEndian.Uint64(v[1:9])
			cl.Close()
			k := binary.BigEndian.AppendUint64([]byte{'c'}, size)
			cp, cl, _ := db.Get(k)
			c, _ := log.ParseCheckpointNote(append([]byte(nil), cp...))
			cl.Close()
			for pass := range 2 {
				bench(fmt.Sprintf("Get cache %dMiB pass %d", cs>>20, pass), st, size, c.Hash, 40000)
			}
			db.Close()
			cache.Unref()
		}
	case "metrics":
		db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatValueSeparation})
		if err != nil {
			panic(err)
		}
		fmt.Println(db.Metrics().String())
		db.Close()
	}
}

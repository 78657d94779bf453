package logpebble

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

func TestExpRead(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXP_N"))
	if n == 0 {
		t.Skip()
	}
	dir := os.Getenv("EXP_DIR")
	s, err := Open(dir, nil)
	must(t, err)
	start := time.Now()
	if os.Getenv("EXP_FILL") != "" {
		fill(t, s, newAppender(), n/256, 256, 1024)
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if m := s.db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.EstimatedDebt == 0 {
				break
			}
		}
		s.Close()
		return
	}
	fmt.Printf("fill %d: %.0f entries/s\n", n, float64(n)/time.Since(start).Seconds())
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m := s.db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.EstimatedDebt == 0 {
			break
		}
	}
	if os.Getenv("EXP_REOPEN") != "" {
		must(t, s.Close())
		s, err = Open(dir, nil)
		must(t, err)
	}
	st, _ := s.State(context.Background())
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr, _ := rf.NewRange(0, st.Size, st.Range)
	root, _ := cr.GetRootHash(nil)
	for round := range 3 {
		var wg sync.WaitGroup
		const N = 50000
		start := time.Now()
		for w := range 2 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range N {
					i := r.Uint64N(st.Size)
					nodes, _ := proof.Inclusion(i, st.Size)
					ids := append(nodes.IDs, compact.NewNodeID(0, i))
					hs, err := s.ReadNodes(context.Background(), ids)
					if err != nil {
						t.Error(err)
						return
					}
					p, _ := nodes.Rehash(hs[:len(hs)-1], rfc6962.DefaultHasher.HashChildren)
					if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, st.Size, hs[len(hs)-1], p, root); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("round %d: %.0f verified proofs/s (2 goroutines)\n", round, 2*N/time.Since(start).Seconds())
	}
	for _, l := range strings.Split(s.db.Metrics().String(), "\n") {
		if strings.Contains(l, "Block cache") || strings.Contains(l, "Cgo memory") || strings.Contains(l, "Compactions") || strings.Contains(l, "Flushes") || strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "total") || strings.HasPrefix(l, "MemTables") {
			fmt.Println(l)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("go heap inuse %d MiB, heap sys %d MiB, total sys %d MiB\n", ms.HeapInuse>>20, ms.HeapSys>>20, ms.Sys>>20)
	st2, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st2), "\n") {
		if strings.HasPrefix(l, "VmHWM") || strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "Rss") {
			fmt.Println(l)
		}
	}
	s.Close()
}

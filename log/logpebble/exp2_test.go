package logpebble

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

func TestExpRead(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXP_N"))
	if n == 0 {
		t.Skip()
	}
	dir := t.TempDir()
	cs, _ := strconv.Atoi(os.Getenv("EXP_CACHE"))
	mt, _ := strconv.Atoi(os.Getenv("EXP_MT"))
	o := &Options{CacheSize: int64(cs) << 20, MemTableSize: uint64(mt) << 20}
	s, err := Open(dir, o)
	must(t, err)
	fill(t, s, newAppender(), n/256, 256, 1024)
	if os.Getenv("EXP_COMPACT") != "" {
		must(t, s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true))
	}
	if os.Getenv("EXP_REOPEN") != "" {
		must(t, s.Close())
		s, err = Open(dir, o)
		must(t, err)
	}
	st, _ := s.State(context.Background())
	r := rand.New(rand.NewPCG(1, 1))
	for _, mode := range []string{"iter", "get", "iter", "get", "iter"} {
		start := time.Now()
		const N = 5000
		for range N {
			i := r.Uint64N(st.Size)
			nodes, _ := proof.Inclusion(i, st.Size)
			ids := append(nodes.IDs, compact.NewNodeID(0, i))
			var err error
			if mode == "iter" {
				_, err = s.ReadNodes(context.Background(), ids)
			} else {
				_, err = s.readNodesGet(ids)
			}
			must(t, err)
		}
		fmt.Printf("%s: %v/proof\n", mode, time.Since(start)/N)
	}
	for _, l := range strings.Split(s.db.Metrics().String(), "\n") {
		if strings.Contains(l, "cache") || strings.HasPrefix(l, "total") || strings.Contains(l, "Compactions") || strings.HasPrefix(l, "    0") {
			fmt.Println(l)
		}
	}
	st2, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st2), "\n") {
		if strings.HasPrefix(l, "VmHWM") {
			fmt.Println(l)
		}
	}
	s.Close()
}

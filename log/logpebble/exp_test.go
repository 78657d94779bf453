package logpebble

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func TestExpFill(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXP_N"))
	if n == 0 {
		t.Skip()
	}
	cfg := os.Getenv("EXP_CFG")
	o := &Options{testingOnlyPebble: func(po *pebble.Options) {
		switch cfg {
		case "vsep":
			po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
				return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 256, MaxBlobReferenceDepth: 10, RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 0.2}
			}
		}
	}}
	dir := t.TempDir()
	s, err := Open(dir, o)
	must(t, err)
	start := time.Now()
	fill(t, s, newAppender(), n/256, 256, 1024)
	el := time.Since(start)
	fmt.Printf("cfg=%s n=%d: %.0f entries/s\n", cfg, n, float64(n)/el.Seconds())
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmHWM") || strings.HasPrefix(l, "VmRSS") {
			fmt.Println(l)
		}
	}
	if os.Getenv("EXP_METRICS") != "" {
		fmt.Println(s.db.Metrics().String())
	}
	s.Close()
}

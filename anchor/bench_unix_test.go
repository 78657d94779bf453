//go:build unix

package anchor_test

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAnchorRound is the cost of one anchoring round with two TSAs
// and a Rekor: the digest, three HTTP exchanges on loopback, verifying
// each answer, the consistency proof, storing the record (two fsyncs) and
// appending the anchor entry. The authorities run in this process, so
// their signing is counted too: an upper bound on what anchoring every
// second takes from the appends.
func BenchmarkAnchorRound(b *testing.B) {
	e := newEnv(b, 2, true)
	r := e.runner(nil)
	ctx := context.Background()
	cpu0 := cpuTime()
	for b.Loop() {
		e.appendN(1)
		if _, err := r.AnchorNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/round")
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

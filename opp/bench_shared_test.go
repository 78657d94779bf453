package opp_test

import (
	"testing"
	"time"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/opp"
)

// BenchmarkSharedObservedClaim measures an observed claim on a shared
// PostgreSQL log (the cluster of tools/pgtest/start.sh), two sidecars
// open on it: each iteration creates and accepts a task through one,
// records a call and its result, and claims the task citing the call.
// claim-ns/op is the claim's mean latency alone: its fenced append, on
// the task and (since the fence took more than one key) on the call.
func BenchmarkSharedObservedClaim(b *testing.B) {
	dsn := pgtest.DSN(b)
	s, v := logtest.NewKey(b, "opp.test/shared")
	la, lb := openSidecar(b, dsn, s, v), openSidecar(b, dsn, s, v)
	a, err := opp.Open(ctx, la, la.size(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := opp.Open(ctx, lb, lb.size(), nil); err != nil {
		b.Fatal(err)
	}
	var claim time.Duration
	for b.Loop() {
		id := mustOK(b)(a.Create(ctx, "alice", opp.CreateArgs{Title: "bench"})).Task.ID
		mustOK(b)(a.Accept(ctx, "bob", id))
		call := appendCallStart(b, la, "bob")
		appendCallResult(b, la, "bob", call)
		t0 := time.Now()
		mustOK(b)(a.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "ok", Evidence: []uint64{call}}))
		claim += time.Since(t0)
	}
	b.ReportMetric(float64(claim.Nanoseconds())/float64(b.N), "claim-ns/op")
}

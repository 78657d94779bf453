// Command rekorlocal runs a Trillian log (admin server, log server and a
// live sequencer) in one process with in-memory storage, for tests that
// put a real rekor-server v1.5.4 in front of it (research/anchoring.md
// §4, recipe B). Nothing is persisted: a restart starts an empty log.
//
// It prints one line, "trillian <host:port>", once the gRPC endpoint is
// listening, and serves until SIGINT or SIGTERM. Point rekor-server at it
// with --trillian_log_server.address and --trillian_log_server.port; with
// --trillian_log_server.tlog_id unset rekor-server creates its tree.
//
// Trillian's storage/memory is meant "SOLELY for use in integration
// tests"; that is all this is for. It lives in its own module so Trillian
// never enters the product's dependency graph.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/trillian/extension"
	"github.com/google/trillian/monitoring"
	"github.com/google/trillian/quota"
	"github.com/google/trillian/storage/memory"
	"github.com/google/trillian/testonly/integration"
)

func main() {
	interval := flag.Duration("sequencer-interval", 100*time.Millisecond, "time between sequencer runs (a Rekor write waits for one)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "rekorlocal: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	integration.SequencerInterval = *interval
	ts := memory.NewTreeStorage()
	reg := extension.Registry{
		AdminStorage:  memory.NewAdminStorage(ts),
		LogStorage:    memory.NewLogStorage(ts, monitoring.InertMetricFactory{}),
		QuotaManager:  quota.Noop(),
		MetricFactory: monitoring.InertMetricFactory{},
	}
	env, err := integration.NewLogEnvWithRegistry(ctx, 1, reg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rekorlocal: starting trillian: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("trillian %s\n", env.Address)
	<-ctx.Done()
	env.Close()
}

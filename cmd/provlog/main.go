// Command provlog is the provlog sidecar and its log tools.
//
// Usage:
//
//	provlog serve [--config F] [--data D] [--http ADDR]
//	provlog keygen [--origin O] --data D
//	provlog vkey --data D
//	provlog prove (--data D | --log URL) (--index N | --leaf-hash HEX) [--size S]
//	provlog verify-proof --vkey VKEY [--witness VKEY]... [--threshold K] [--entry FILE] FILE
//	provlog audit (--data D | --log URL)
//	provlog tasks (--data D | --log URL) [list | show ID]
//	provlog replay (--data D | --log URL) --config F [--json] [--runs N] [--single-run] [--from I --to J]
//	provlog anchor --config F [--data D]
//	provlog token add --config F --actor NAME [--reader]
//	provlog export --data D --out DIR [--from I] [--to J] [--config F]
//	provlog verify-bundle DIR
//	provlog resolve NAME [--opt k=v]...
//	provlog resolvers
//
// Commands that read a log over HTTP take the reader token from --token or
// the PROVLOG_TOKEN environment variable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is provlog's version, recorded in every log's genesis entry.
const version = "0.1.0-dev"

// errUsage marks a command line that was wrong; main exits 2 for it.
var errUsage = errors.New("usage")

type command struct {
	name, args, help string
	run              func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "[--config F] [--data D] [--http ADDR]", "run the sidecar", runServe},
		{"keygen", "[--origin O] --data D", "make the log's keys in a new data dir", runKeygen},
		{"vkey", "--data D", "print the log's verifier key", runVKey},
		{"prove", "(--data D | --log URL) (--index N | --leaf-hash HEX) [--size S]", "print a tlog-proof receipt", runProve},
		{"verify-proof", "--vkey VKEY [--witness VKEY]... [--threshold K] [--entry FILE] FILE", "verify a receipt offline; exit 0 only if valid", runVerifyProof},
		{"audit", "(--data D [--config F] | --log URL [--vkey VKEY])", "recompute the tree, check every checkpoint and anchor, rebuild task state", runAudit},
		{"tasks", "(--data D | --log URL) [list | show ID]", "print task state and history", runTasks},
		{"anchor", "--config F [--data D]", "anchor the latest checkpoint now (with the sidecar stopped)", runAnchor},
		{"token", "add --config F --actor NAME [--reader]", "make a bearer token; print it once, store its hash", runToken},
		{"export", "--data D --out DIR [--from I] [--to J] [--config F]", "write a bundle (entries, PROV-JSON, checkpoint, anchors, keys) that verifies anywhere", runExport},
		{"verify-bundle", "DIR", "check a bundle offline with the keys and roots inside it; exit 0 only if valid", runVerifyBundle},
		{"resolve", "NAME [--opt k=v]...", "resolve a data-source release now (a preset or a generic resolver)", runResolve},
		{"resolvers", "", "list the release resolvers and presets", runResolvers},
		{"replay", "(--data D | --log URL) --config F [--json] [--runs N] [--single-run] [--from I --to J]", "re-run recorded calls and tell changed data from flaky tools", runReplay},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: provlog <command> [flags]")
		for _, c := range commands() {
			fmt.Fprintf(stderr, "  %-13s %s\n  %-13s   %s\n", c.name, c.args, "", c.help)
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		return 2
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 2
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "provlog %s: %v\nusage: provlog %s %s\n", c.name, err, c.name, c.args)
			return 2
		default:
			fmt.Fprintf(stderr, "provlog %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "provlog: unknown command %q\n", args[0])
	usage()
	return 2
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("provlog "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and refuses stray positional arguments beyond max.
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > maxArgs {
		return fmt.Errorf("unexpected argument %q: %w", fs.Arg(maxArgs), errUsage)
	}
	return nil
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errUsage)...)
}

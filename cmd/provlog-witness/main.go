// Command provlog-witness is a transparency log witness.
//
// Usage:
//
//	provlog-witness keygen --name NAME --key FILE
//	provlog-witness vkey --key FILE
//	provlog-witness serve --config FILE --http ADDR
//	provlog-witness check --log URL --vkey VKEY --data DIR [--origin O] [--evidence FILE] [--every D]
//
// keygen makes the witness's Ed25519 key (a cosignature/v1 key, c2sp.org/
// tlog-cosignature) and prints its verifier key, which logs and verifiers
// configure. serve answers c2sp.org/tlog-witness@v1.0.0 add-checkpoint
// requests for the logs in its config (see [Config]). check follows a
// c2sp.org/tlog-tiles log from the outside: it fetches the checkpoint,
// proves it consistent with the last one it recorded from the log's hash
// tiles, and records it; when the log contradicts itself it writes the
// evidence to a file and exits 1.
//
// Exit codes: 0 success, 1 failure (for check: a fork, a rollback, or the
// log could not be checked), 2 bad usage.
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

// errUsage marks a command line that was wrong; main exits 2 for it.
var errUsage = errors.New("usage")

type command struct {
	name, args, help string
	run              func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"keygen", "--name NAME --key FILE", "make the witness key; print its verifier key", runKeygen},
		{"vkey", "--key FILE", "print the witness's verifier key", runVKey},
		{"serve", "--config FILE --http ADDR", "serve add-checkpoint (c2sp.org/tlog-witness@v1.0.0)", runServe},
		{"check", "--log URL --vkey VKEY --data DIR [--origin O] [--evidence FILE] [--every D]", "check a tlog-tiles log's new checkpoint; exit 1 on a fork", runCheck},
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
		fmt.Fprintln(stderr, "usage: provlog-witness <command> [flags]")
		for _, c := range commands() {
			fmt.Fprintf(stderr, "  %-7s %s\n  %-7s   %s\n", c.name, c.args, "", c.help)
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
			fmt.Fprintf(stderr, "provlog-witness %s: %v\nusage: provlog-witness %s %s\n", c.name, err, c.name, c.args)
			return 2
		default:
			fmt.Fprintf(stderr, "provlog-witness %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "provlog-witness: unknown command %q\n", args[0])
	usage()
	return 2
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("provlog-witness "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errUsage)...)
}

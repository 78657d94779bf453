// Command provlog-witness is a transparency log witness.
//
// Usage:
//
//	provlog-witness keygen --name NAME --key FILE
//	provlog-witness vkey --key FILE
//	provlog-witness serve --config FILE --http ADDR
//	provlog-witness check --log URL --vkey VKEY --data DIR [--origin O] [--evidence FILE] [--every D] [--max-stale D]
//	provlog-witness verify-fork --vkey VKEY [--vkey VKEY]... FILE
//
// keygen makes the witness's Ed25519 key (a cosignature/v1 key, c2sp.org/
// tlog-cosignature) and prints its verifier key, which logs and verifiers
// configure. serve answers c2sp.org/tlog-witness@v1.0.0 add-checkpoint
// requests for the logs in its config (see [Config]). check follows a
// c2sp.org/tlog-tiles log from the outside: it fetches the checkpoint,
// proves it consistent with the last one it recorded from the log's hash
// tiles, and records it; when the log contradicts itself it writes the
// evidence to a file and exits 1. verify-fork checks such a file with
// the log's verifier keys alone, offline: exit 0 only if it proves a fork.
//
// Exit codes: 0 success, 1 failure (for check: a fork, a rollback, or the
// log could not be checked), 2 bad usage.
package main

import (
	"context"
	"flag"
	"io"

	"github.com/provlog/provlog/cmd/internal/cli"
)

// errUsage marks a command line that was wrong; the exit code is 2.
var errUsage = cli.ErrUsage

func commands() []cli.Command {
	return []cli.Command{
		cli.Cmd("keygen", "--name NAME --key FILE", "make the witness key; print its verifier key", runKeygen),
		cli.Cmd("vkey", "--key FILE", "print the witness's verifier key", runVKey),
		cli.Cmd("serve", "--config FILE --http ADDR", "serve add-checkpoint (c2sp.org/tlog-witness@v1.0.0)", runServe),
		cli.Cmd("check", "--log URL --vkey VKEY --data DIR [--origin O] [--evidence FILE] [--every D] [--max-stale D]", "check a tlog-tiles log's new checkpoint; exit 1 on a fork", runCheck),
		cli.Cmd("verify-fork", "--vkey VKEY [--vkey VKEY]... FILE", "verify fork evidence offline; exit 0 only if it proves a fork", runVerifyFork),
	}
}

func main() { cli.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Run(ctx, "provlog-witness", commands(), args, stdout, stderr)
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlags("provlog-witness", name, stderr)
}

// parseFlags parses args and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return cli.ParseFlags(fs, args, 0)
}

func usageErr(format string, args ...any) error { return cli.UsageErr(format, args...) }

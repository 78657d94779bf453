// Command provlog is the provlog sidecar and its log tools.
//
// Usage:
//
//	provlog serve [--config F] [--data D] [--http ADDR] [--pprof ADDR]
//	provlog keygen [--origin O] --data D
//	provlog vkey --data D
//	provlog prove (--data D | --log URL) (--index N | --leaf-hash HEX) [--size S] [--format tlog-proof|cose]
//	provlog verify-proof --vkey VKEY [--witness VKEY]... [--threshold K] [--entry FILE] [--json] FILE
//	provlog audit (--data D [--vkey VKEY] [--config F] | --log URL --vkey VKEY) [--json]
//	provlog tasks (--data D | --log URL) [list | show ID]
//	provlog replay (--data D | --log URL) --config F [--json] [--runs N] [--single-run] [--from I --to J]
//	provlog anchor --config F [--data D]
//	provlog token add --config F --actor NAME [--reader]
//	provlog export (--data D | --log URL --vkey VKEY) --out DIR [--from I] [--to J] [--config F]
//	provlog verify-bundle [--json] DIR
//	provlog evidence (--data D | --log URL --vkey VKEY) (--index N | --leaf-hash HEX) --out DIR [--config F]
//	provlog verify-evidence --vkey VKEY [--witness VKEY]... [--witness-threshold N] [--tsa-roots PEMFILE]... [--rekor-key PEMFILE]... [--json] DIR
//	provlog view [--http ADDR] DIR
//	provlog purge (--data D | --log URL) (--older-than DUR | --before T | --task ID | --actor A | --blob H)... --reason TEXT [--dry-run]
//	provlog resolve NAME [--opt k=v]...
//	provlog resolvers
//
// Commands that read a log over HTTP take the reader token from --token or
// the PROVLOG_TOKEN environment variable.
package main

import (
	"context"
	"flag"
	"io"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/proxy"
)

// version is provlog's version, recorded in every log's genesis entry.
const version = "0.1.0-dev"

// errUsage marks a command line that was wrong; the exit code is 2.
var errUsage = cli.ErrUsage

func commands() []cli.Command {
	return []cli.Command{
		cli.Cmd("serve", "[--config F] [--data D] [--http ADDR] [--pprof ADDR]", "run the sidecar", runServe),
		cli.Cmd("keygen", "[--origin O] --data D", "make the log's keys in a new data dir", runKeygen),
		cli.Cmd("vkey", "--data D", "print the log's verifier key", runVKey),
		cli.Cmd("prove", "(--data D | --log URL) (--index N | --leaf-hash HEX) [--size S] [--format tlog-proof|cose]", "print a tlog-proof receipt (or an RFC 9942 COSE receipt)", runProve),
		cli.Cmd("verify-proof", "--vkey VKEY [--witness VKEY]... [--threshold K] [--entry FILE] [--json] FILE", "verify a receipt offline; exit 0 only if valid", runVerifyProof),
		cli.Cmd("audit", "(--data D [--vkey VKEY] [--config F] | --log URL --vkey VKEY) [--json]", "recompute the tree, check every checkpoint and anchor, rebuild task state", runAudit),
		cli.Cmd("tasks", "(--data D | --log URL) [list | show ID]", "print task state and history", runTasks),
		cli.Cmd("anchor", "--config F [--data D]", "anchor the latest checkpoint now (with the sidecar stopped)", runAnchor),
		cli.Cmd("token", "add --config F --actor NAME [--reader]", "make a bearer token; print it once, store its hash", runToken),
		cli.Cmd("export", "(--data D | --log URL --vkey VKEY) --out DIR [--from I] [--to J] [--config F]", "write a bundle (entries, PROV-JSON, checkpoint, anchors, keys) that verifies anywhere", runExport),
		cli.Cmd("verify-bundle", "[--json] DIR", "check a bundle offline with the keys and roots inside it; exit 0 only if valid", runVerifyBundle),
		cli.Cmd("view", "[--http ADDR] DIR", "serve the auditor's view of a bundle or an evidence directory on loopback, offline; the page verifies entries itself", runView),
		cli.Cmd("evidence", "(--data D | --log URL --vkey VKEY) (--index N | --leaf-hash HEX) --out DIR [--config F]", "write one entry's self-contained evidence (receipts, consistency, anchors, keys, task history)", runEvidence),
		cli.Cmd("verify-evidence", "--vkey VKEY [--witness VKEY]... [--witness-threshold N] [--tsa-roots PEMFILE]... [--rekor-key PEMFILE]... [--json] DIR", "check an evidence directory offline; say what it proves; exit 0 only if valid", runVerifyEvidence),
		cli.Cmd("resolve", "NAME [--opt k=v]...", "resolve a data-source release now (a preset or a generic resolver)", runResolve),
		cli.Cmd("resolvers", "", "list the release resolvers and presets", runResolvers),
		cli.Cmd("purge", "(--data D | --log URL) (--older-than DUR | --before T | --task ID | --actor A | --blob H)... --reason TEXT [--dry-run]",
			"delete retained payloads for retention or erasure; a purge entry records what and why, proofs stay valid", runPurge),
		cli.Cmd("replay", "(--data D | --log URL) --config F [--json] [--runs N] [--single-run] [--from I --to J]", "re-run recorded calls and tell changed data from flaky tools", runReplay),
	}
}

func main() {
	proxy.ReaperMain() // a stdio server's reaper is provlog re-executed
	cli.Main(run)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Run(ctx, "provlog", commands(), args, stdout, stderr)
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlags("provlog", name, stderr)
}

// parseFlags parses args and refuses positional arguments beyond maxArgs.
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	return cli.ParseFlags(fs, args, maxArgs)
}

func usageErr(format string, args ...any) error { return cli.UsageErr(format, args...) }

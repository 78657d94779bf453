// Package cli is the command-line frame the provlog and provlog-witness
// mains share: a table of subcommands, flag sets that report errors instead
// of exiting, and exit codes (0 success, 1 failure, 2 bad usage).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/provlog/provlog/log"
)

// ErrUsage marks a command line that was wrong; Run exits 2 for it.
var ErrUsage = errors.New("usage")

// errReported is bad usage the flag package has already explained.
var errReported = fmt.Errorf("flags: %w", ErrUsage)

// A Command is one subcommand.
type Command struct {
	Name, Args, Help string
	Run              func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// Cmd returns the Command name: args is its synopsis, help what it does,
// run what runs it. A program's table of commands is a list of Cmd.
func Cmd(name, args, help string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) Command {
	return Command{Name: name, Args: args, Help: help, Run: run}
}

// Run runs the subcommand args[0] of program prog and returns the exit code.
func Run(ctx context.Context, prog string, cmds []Command, args []string, stdout, stderr io.Writer) int {
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	usage := func() {
		fmt.Fprintf(stderr, "usage: %s <command> [flags]\n", prog)
		for _, c := range cmds {
			fmt.Fprintf(stderr, "  %-*s %s\n  %-*s   %s\n", width, c.Name, c.Args, width, "", c.Help)
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		return 2
	}
	for _, c := range cmds {
		if c.Name != args[0] {
			continue
		}
		err := c.Run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp), errors.Is(err, errReported):
			return 2
		case errors.Is(err, ErrUsage):
			fmt.Fprintf(stderr, "%s %s: %s\nusage: %s %s %s\n", prog, c.Name, log.Printable(err.Error()), prog, c.Name, c.Args)
			return 2
		default:
			// An error can quote what a log, a bundle, an evidence
			// directory or a server wrote: escaped, on one line, so that
			// it cannot act on the terminal or add lines of its own.
			fmt.Fprintf(stderr, "%s %s: %s\n", prog, c.Name, log.Printable(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n", prog, args[0])
	usage()
	return 2
}

// NewFlags returns a flag set for "prog name" that reports errors instead
// of exiting.
func NewFlags(prog, name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses args and refuses positional arguments beyond maxArgs.
func ParseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return errReported // fs printed the error and the flags
	}
	if fs.NArg() > maxArgs {
		return UsageErr("unexpected argument %q", fs.Arg(maxArgs))
	}
	return nil
}

// Strings is a repeatable string flag: each use adds one value.
type Strings []string

func (l *Strings) String() string     { return strings.Join(*l, ",") }
func (l *Strings) Set(s string) error { *l = append(*l, s); return nil }

// UsageErr formats an error that marks bad usage.
func UsageErr(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrUsage)...)
}

// Main runs a program's command line (run, as its main would call it)
// until SIGINT or SIGTERM cancels the context, and exits with run's code.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Serve serves srv on ln until it fails or ctx is done; then it shuts srv
// down, giving requests under way 10 seconds.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, logger *slog.Logger, prog string) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info(prog + " shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

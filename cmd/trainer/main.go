// Command trainer runs the emulated TPU trainer and its tools. Each
// subcommand lives in its own file and registers itself in init, so that work
// on one command never touches another (the same pattern as cmd/sigctl; the
// dispatcher is internal/cli's).
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/sigdata/sig/internal/cli"
)

// command is one trainer subcommand.
type command struct {
	name  string
	usage string // one line: arguments and what it does
	// run parses args (everything after the command name) and does the work.
	// Output goes to stdout, diagnostics to stderr.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// sigterm: the command handles SIGTERM itself, as a preemption notice
	// (paper VI.B), reading sigterms; its context ends only on SIGINT.
	sigterm bool
}

var commands = cli.NewCommands("trainer")

// sigterms delivers SIGTERM to a command that handles it.
var sigterms = commands.SIGTERM

func register(c *command) {
	commands.Register(cli.Command{Name: c.name, Usage: c.usage, Run: c.run, HandlesSIGTERM: c.sigterm})
}

// errUsage marks an error caused by wrong arguments (exit status 2).
var errUsage = cli.ErrUsage

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain dispatches to a subcommand and returns the exit status: 0 on
// success, 1 on failure, 2 on wrong usage.
func runMain(args []string, stdout, stderr io.Writer) int {
	return commands.Main(args, stdout, stderr)
}

// newFlags returns a FlagSet for a subcommand that reports errors instead of
// exiting, so runMain decides the exit status.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlags("trainer", name, stderr)
}

// parseFlags parses a subcommand's flags, marking errors as usage errors.
// Subcommands that take no positional arguments reject them.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return cli.ParseFlags(fs, args)
}

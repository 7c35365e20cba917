// Command sigctl is the user and operator CLI of SIG. Each subcommand lives
// in its own file and registers itself in init, so that work on one command
// never touches another (the dispatcher is internal/cli's).
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/sigdata/sig/internal/cli"
)

// command is one sigctl subcommand.
type command struct {
	name  string
	usage string // one line: arguments and what it does
	// run parses args (everything after the command name) and does the work.
	// Output goes to stdout, diagnostics to stderr.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = cli.NewCommands("sigctl")

func register(c *command) {
	commands.Register(cli.Command{Name: c.name, Usage: c.usage, Run: c.run})
}

// errUsage marks an error caused by wrong arguments (exit status 2).
var errUsage = cli.ErrUsage

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	return commands.Main(args, stdout, stderr)
}

// newFlags returns a FlagSet for a subcommand that reports errors instead of
// exiting, so runMain decides the exit status.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlags("sigctl", name, stderr)
}

// parseInterspersed parses flags that may come before or after positional
// arguments (sigctl canon FILE --json) and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	return cli.ParseInterspersed(fs, args)
}

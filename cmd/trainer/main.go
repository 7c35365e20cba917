// Command trainer runs the emulated TPU trainer and its tools. Each
// subcommand lives in its own file and registers itself in init, so that work
// on one command never touches another (the same pattern as cmd/sigctl).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
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

// sigterms delivers SIGTERM to a command that handles it.
var sigterms = make(chan os.Signal, 1)

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("trainer: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by wrong arguments (exit status 2).
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: trainer COMMAND [flags]")
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].usage)
	}
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain dispatches to a subcommand and returns the exit status: 0 on
// success, 1 on failure, 2 on wrong usage.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "trainer: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	var ctx context.Context
	var stop context.CancelFunc
	if c.sigterm {
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
		signal.Notify(sigterms, syscall.SIGTERM)
		defer signal.Stop(sigterms)
	} else {
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	if err := c.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "trainer %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// newFlags returns a FlagSet for a subcommand that reports errors instead of
// exiting, so runMain decides the exit status.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("trainer "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses a subcommand's flags, marking errors as usage errors.
// Subcommands that take no positional arguments reject them.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

package cli

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

// ErrUsage marks an error caused by wrong arguments: Main exits with
// status 2 for it, 1 for any other error.
var ErrUsage = errors.New("usage")

// Command is one subcommand of a multi-command binary (sigctl, trainer).
// Each lives in its own file and registers itself in init, so that work on
// one command never touches another.
type Command struct {
	Name  string
	Usage string // one line: arguments and what it does
	// Run parses args (everything after the command name) and does the
	// work. Output goes to stdout, diagnostics to stderr.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// HandlesSIGTERM: the command treats SIGTERM itself (the trainer's
	// preemption notice, paper VI.B), reading Commands.SIGTERM; its context
	// ends only on SIGINT. Otherwise both end the context.
	HandlesSIGTERM bool
}

// Commands is a binary's set of subcommands and its dispatcher.
type Commands struct {
	Prog string
	// Default is the command run when none is named (sigd: serve); with
	// none, no arguments print the usage (exit status 2).
	Default string
	// SIGTERM delivers SIGTERM to a command that handles it.
	SIGTERM chan os.Signal
	byName  map[string]*Command
}

// NewCommands returns an empty command set for the binary prog.
func NewCommands(prog string) *Commands {
	return &Commands{Prog: prog, SIGTERM: make(chan os.Signal, 1), byName: map[string]*Command{}}
}

// Register adds c; a name registered twice is a programming error.
func (cs *Commands) Register(c Command) {
	if _, dup := cs.byName[c.Name]; dup {
		panic(cs.Prog + ": command registered twice: " + c.Name)
	}
	cs.byName[c.Name] = &c
}

// Usage lists the commands.
func (cs *Commands) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s COMMAND [flags] [args]\n", cs.Prog)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(cs.byName))
	for n := range cs.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, cs.byName[n].Usage)
	}
}

// Main dispatches args (without the program name) to a subcommand and
// returns the exit status: 0 on success (and for help), 1 on failure, 2 on
// wrong usage.
func (cs *Commands) Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 && cs.Default != "" {
		args = []string{cs.Default}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		cs.Usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cs.byName[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n", cs.Prog, args[0])
		cs.Usage(stderr)
		return 2
	}
	var ctx context.Context
	var stop context.CancelFunc
	if c.HandlesSIGTERM {
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
		signal.Notify(cs.SIGTERM, syscall.SIGTERM)
		defer signal.Stop(cs.SIGTERM)
	} else {
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	if err := c.Run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s %s: %v\n", cs.Prog, c.Name, err)
		if errors.Is(err, ErrUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// NewFlags returns the FlagSet of the subcommand name (NewFlags).
func (cs *Commands) NewFlags(name string, stderr io.Writer) *flag.FlagSet {
	return NewFlags(cs.Prog, name, stderr)
}

// NewFlags returns a FlagSet for a subcommand that reports errors instead of
// exiting, so Main decides the exit status.
func NewFlags(prog, name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses a subcommand's flags, marking errors as usage errors,
// and rejects positional arguments.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	return nil
}

// ParseInterspersed parses flags that may come before or after positional
// arguments (sigctl canon FILE --json) and returns the positionals.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

package main

import (
	"io"
	"os"

	"github.com/sigdata/sig/internal/cli"
)

var commands = cli.NewCommands("trainer")

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain dispatches to a subcommand and returns the exit status: 0 on
// success, 1 on failure, 2 on wrong usage.
func runMain(args []string, stdout, stderr io.Writer) int {
	return commands.Main(args, stdout, stderr)
}

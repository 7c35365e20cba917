// Command sigctl is the user and operator CLI of SIG. Each subcommand lives
// in its own file and registers itself in init, so that work on one command
// never touches another (the dispatcher is internal/cli's). The commands
// that call sigd (or a training job's controller) are remote commands
// (remote.go): each is its flags and its calls, and the connection, --json,
// deadlines and printing are the same for all.
package main

import (
	"io"
	"os"

	"github.com/sigdata/sig/internal/cli"
)

var commands = cli.NewCommands("sigctl")

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	return commands.Main(args, stdout, stderr)
}

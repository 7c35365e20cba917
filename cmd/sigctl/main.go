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

package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/report"
)

// sigctl report [--bench DIR] [--out FILE.md]
//
// Writes the bench report (package report) from the benchmarks' JSON files
// in DIR: Markdown with SVG plots, each plot marked measured or modelled
// next to the paper's figure it mirrors; the plots go to report/ beside the
// Markdown file. An input that is not there is a section saying which
// command writes it; a malformed one is an error naming the file and the
// field, and nothing is written. The operator web UI serves the same
// report (sigd --reports).
func init() {
	commands.Register(cli.Command{Name: "report", Run: runReport,
		Usage: "[--bench DIR] [--out FILE.md]: write the bench report (Markdown, SVG plots in report/ beside it) from DIR's benchmark JSON files"})
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("report", stderr)
	bench := fs.String("bench", "bench", "directory of the benchmarks' JSON files (fleet-run.json, scale.json, ...)")
	out := fs.String("out", "", "Markdown file to write (default DIR/REPORT.md); its plots go to report/ in the same directory")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(*bench, "REPORT.md")
	}
	r, err := report.Build(filepath.Clean(*bench))
	if err != nil {
		return err
	}
	if err := r.WriteFiles(*out); err != nil {
		return err
	}
	var ran, missing []string
	for _, s := range r.Sections {
		if s.Missing != "" {
			missing = append(missing, s.File)
		} else {
			ran = append(ran, s.File)
		}
	}
	fmt.Fprintf(stdout, "wrote %s and %d plots in %s\n", *out, len(r.Plots()), filepath.Join(filepath.Dir(*out), "report"))
	fmt.Fprintf(stdout, "  from: %s\n", orNone(ran))
	fmt.Fprintf(stdout, "  not run (the report says which command writes each): %s\n", orNone(missing))
	return nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

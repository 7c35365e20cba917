package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/figure"
)

// trainer figures FILE.json
//
// Prints the figures of a report (its "figures" object, internal/figure:
// bench/preemption.json, bench/embeddings.json, a `trainer fleet --report`)
// for people: each with its value, MEASURED or MODELLED, how, the paper's
// figure, its constants with their sources, and its sweeps.
func init() {
	commands.Register(cli.Command{Name: "figures", Run: runFigures,
		Usage: "FILE.json: print a report's figures with their kind, constants and sweeps"})
}

func runFigures(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("figures", stderr)
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one report FILE.json", cli.ErrUsage)
	}
	path := pos[0]
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep struct {
		Figures figure.Set `json:"figures"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(rep.Figures) == 0 {
		return fmt.Errorf("%s: no figures", path)
	}
	if err := rep.Figures.Check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	_, err = io.WriteString(stdout, figuresText(rep.Figures))
	return err
}

// figuresText writes every figure of s in name order.
func figuresText(s figure.Set) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s)) {
		f := s[name]
		fmt.Fprintf(&b, "%s = %.4g %s: %s\n", name, f.Value, f.Unit, strings.ToUpper(string(f.Kind)))
		fmt.Fprintf(&b, "  how: %s\n", f.How)
		if f.Paper != nil {
			fmt.Fprintf(&b, "  paper: %.4g (%s)\n", f.Paper.Value, f.Paper.Where)
		}
		for _, k := range slices.Sorted(maps.Keys(f.Constants)) {
			c := f.Constants[k]
			fmt.Fprintf(&b, "  constant %s = %.4g %s: %s\n", k, c.Value, c.Unit, c.Source)
		}
		for _, k := range sweptConstants(f) {
			fmt.Fprintf(&b, "  sweep %s (%s):", k, f.Constants[k].Unit)
			for _, p := range f.SweepOf(k) {
				fmt.Fprintf(&b, " %.4g: %.4g", p.At, p.Value)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

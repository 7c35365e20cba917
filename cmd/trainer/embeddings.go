package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/trainer/embedding/embreport"
)

// trainer embeddings-report [--json FILE] [--models A,B,...] [--steps N]
//
// Runs the five synthetic models A–E (trainer/embedding/embreport: table counts,
// vocabularies 64 to 300M scaled to fit memory, widths 1 to 380, valencies 1
// to 230, paper VII.A) through Baseline → +Pipelining → +Hybrid partitioning
// → +FDP (paper Figure 7) and uncoalesced → coalesced parameter servers
// (paper VII.E), prints the tables and writes the JSON report.
func init() {
	commands.Register(cli.Command{
		Name:  "embeddings-report",
		Usage: "[--json FILE] [--models A,...]: Figure 7 and VII.E on synthetic models A-E",
		Run:   runEmbeddingsReport,
	})
}

func runEmbeddingsReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("embeddings-report", stderr)
	jsonPath := fs.String("json", "embeddings.json", "write the JSON report to `FILE` (\"-\" for stdout, \"\" for none)")
	var o embreport.Options
	o.Models = cli.List{"A", "B", "C", "D", "E"}
	fs.Var((*cli.List)(&o.Models), "models", "comma-separated models to run")
	fs.IntVar(&o.Chips, "chips", 16, "chips of the emulated slice (the paper's 128 scaled down)")
	fs.IntVar(&o.BatchPerChip, "batch-per-chip", 256, "examples per chip per step")
	fs.IntVar(&o.Steps, "steps", 3, "real steps per plan")
	fs.IntVar(&o.ProfileSteps, "profile-steps", 300, "steps of the earlier model whose ~3% sampled batches are profiled")
	fs.Int64Var(&o.Elements, "elements", 128<<20, "embedding parameters per model in memory")
	fs.IntVar(&o.PSSteps, "ps-steps", 3, "parameter-server steps per mode (negative: skip)")
	fs.Int64Var(&o.PSElements, "ps-elements", 8<<20, "embedding parameters the parameter servers hold")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if o.Chips <= 0 || o.BatchPerChip <= 0 || o.Steps <= 0 || o.ProfileSteps <= 0 || o.Elements <= 0 || o.PSElements <= 0 {
		return fmt.Errorf("%w: sizes must be positive", cli.ErrUsage)
	}
	if !*quiet {
		o.Progress = stderr
	}
	rep, err := embreport.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	switch *jsonPath {
	case "":
	case "-":
		return rep.WriteJSON(stdout)
	default:
		return writeFile(*jsonPath, rep.WriteJSON)
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/trainer/embedding/embreport"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/steptime"
)

// trainer embeddings-report [--json FILE] [--models A,B,...] [--steps N]
// [--shard-overhead-ns NS] [--contention K] [--shard-overheads LIST]
// [--contentions LIST] [--no-sweeps]
//
// Runs the five synthetic models A–E (trainer/embedding/embreport: table counts,
// vocabularies 64 to 300M scaled to fit memory, widths 1 to 380, valencies 1
// to 230, paper VII.A) through Baseline → +Pipelining → +Hybrid partitioning
// → +FDP (paper Figure 7) and uncoalesced → coalesced parameter servers
// (paper VII.E), prints the tables and writes the JSON report. Figure 7's
// speedups are modelled: the report lists the constants that price them and
// re-runs the ladder at each swept shard overhead and contention.
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
	fs.Float64Var(&o.ShardOverheadNS, "shard-overhead-ns", partition.DefaultShardOverheadNS, "SparseCore time per shard per step (a guess; negative: none)")
	fs.Float64Var(&o.Contention, "contention", steptime.DefaultContention, "pipelining contention (a guess; negative: none)")
	shardSweep := fs.String("shard-overheads", "0,250,1000,4000", "shard overheads (ns) to re-plan, re-run and re-price the ladder at")
	contentionSweep := fs.String("contentions", "0,0.05,0.1,0.2,0.5", "contentions to re-price the ladder at")
	fs.BoolVar(&o.NoSweeps, "no-sweeps", false, "leave the sweeps out")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.ShardOverheadSweep, err = floatList("--shard-overheads", *shardSweep); err != nil {
		return err
	}
	if o.ContentionSweep, err = floatList("--contentions", *contentionSweep); err != nil {
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

// floatList reads comma-separated non-negative numbers.
func floatList(flag, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: %s: %q is not a non-negative number", cli.ErrUsage, flag, f)
		}
		out = append(out, v)
	}
	return out, nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/trainer/embedding/partition"
)

// trainer partition --config FILE.json [--solver heuristic|exact] [--json]
//
// Reads a partitioner configuration (format in trainer/embedding/partition/config.go),
// solves it and prints the plan: a readable summary, or with --json an
// object with these fields:
//
//	solver, optimal, nodes          which solver ran; whether the plan was proved optimal
//	cost_ns                         largest SparseCore time per step (ns)
//	bound, bound_kind, gap          lower bound on cost_ns (ns) and what it is; (cost-bound)/cost
//	load_imbalance                  N·max B_i / Σ B_i (paper Eq. 1)
//	max_hbm_bytes_per_chip, hbm_bytes_per_chip
//	solve_ms                        wall time of the solve
//	row_sharding                    the baseline plan (every table row partitioned over all
//	                                SparseCores): {load_imbalance, cost_ns}, or null if it does not fit
//	sparsecores, sparsecores_per_chip
//	layouts                         per table: col_splits, row_parts, row_dist, strategy, shards
//	shards                          per shard: table, col_from, col_to, row_dist, row_part,
//	                                row_parts, sparsecore, rows, hbm_bytes,
//	                                unique_rows_per_batch, bytes_per_step, time_ns
//	sparsecore_time_ns, sparsecore_bytes_per_step, chip_hbm_bytes
func init() {
	commands.Register(cli.Command{
		Name:  "partition",
		Usage: "--config FILE.json [--solver heuristic|exact] [--json]: plan embedding table placement",
		Run:   runPartition,
	})
}

type partitionOutput struct {
	Solver             string             `json:"solver"`
	Optimal            bool               `json:"optimal"`
	Nodes              int64              `json:"nodes"`
	CostNS             float64            `json:"cost_ns"`
	Bound              float64            `json:"bound"`
	BoundKind          string             `json:"bound_kind"`
	Gap                float64            `json:"gap"`
	LoadImbalance      float64            `json:"load_imbalance"`
	MaxHBMBytesPerChip int64              `json:"max_hbm_bytes_per_chip"`
	HBMBytesPerChip    int64              `json:"hbm_bytes_per_chip"`
	SolveMS            float64            `json:"solve_ms"`
	RowSharding        *baselineOutput    `json:"row_sharding"`
	SparseCores        int                `json:"sparsecores"`
	SparseCoresPerChip int                `json:"sparsecores_per_chip"`
	Layouts            []partition.Layout `json:"layouts"`
	Shards             []partition.Shard  `json:"shards"`
	SparseCoreTimeNS   []float64          `json:"sparsecore_time_ns"`
	SparseCoreBytes    []float64          `json:"sparsecore_bytes_per_step"`
	ChipHBMBytes       []int64            `json:"chip_hbm_bytes"`
}

type baselineOutput struct {
	LoadImbalance float64 `json:"load_imbalance"`
	CostNS        float64 `json:"cost_ns"`
}

func runPartition(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("partition", stderr)
	config := fs.String("config", "", "partitioner configuration `FILE.json` (required)")
	solver := fs.String("solver", "heuristic", "heuristic or exact")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	nodeLimit := fs.Int64("node-limit", partition.DefaultNodeLimit, "exact solver: branch-and-bound node limit")
	budget := fs.Duration("time-budget", 0, "exact solver: stop after this long (0: no limit beyond --node-limit)")
	tolerance := fs.Float64("gap-tolerance", 0, "exact solver: stop once proved within this relative gap")
	seed := fs.Uint64("seed", 0, "heuristic: seed of the random perturbations")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *config == "" {
		return fmt.Errorf("%w: --config is required", cli.ErrUsage)
	}
	s, err := partition.ParseSolver(*solver)
	if err != nil {
		return fmt.Errorf("%w: --solver: %v", cli.ErrUsage, err)
	}
	if *nodeLimit <= 0 || *budget < 0 || !(*tolerance >= 0 && *tolerance < 1) {
		return fmt.Errorf("%w: --node-limit must be > 0, --time-budget >= 0, --gap-tolerance in [0, 1)", cli.ErrUsage)
	}
	f, err := os.Open(*config)
	if err != nil {
		return err
	}
	p, err := partition.ReadConfig(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *config, err)
	}
	plan, err := partition.Solve(p, partition.Options{
		Solver: s, Seed: *seed, NodeLimit: *nodeLimit, TimeBudget: *budget, GapTolerance: *tolerance,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", *config, err)
	}
	var baseline *baselineOutput
	if rows, err := partition.RowSharding(p.Tables, p.Topology); err == nil {
		if err := partition.Evaluate(p, rows); err == nil {
			baseline = &baselineOutput{LoadImbalance: rows.LoadImbalance, CostNS: rows.CostNS}
		}
	}
	out := partitionOutput{
		Solver: plan.Solver, Optimal: plan.Optimal, Nodes: plan.Nodes,
		CostNS: plan.CostNS, Bound: plan.BoundNS, BoundKind: plan.BoundKind, Gap: plan.Gap,
		LoadImbalance:      plan.LoadImbalance,
		MaxHBMBytesPerChip: plan.MaxHBMBytesPerChip, HBMBytesPerChip: plan.HBMBytesPerChip,
		SolveMS:     float64(plan.SolveTime) / float64(time.Millisecond),
		RowSharding: baseline,
		SparseCores: plan.SparseCores, SparseCoresPerChip: plan.SparseCoresPerChip,
		Layouts: plan.Layouts, Shards: plan.Shards,
		SparseCoreTimeNS: plan.SparseCoreTimeNS, SparseCoreBytes: plan.SparseCoreBytes, ChipHBMBytes: plan.ChipHBMBytes,
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printPlan(stdout, &out)
	return nil
}

func printPlan(w io.Writer, o *partitionOutput) {
	status := "stopped early"
	switch {
	case o.Optimal:
		status = "proved optimal"
	case o.Solver == string(partition.Heuristic):
		status = "heuristic"
	}
	fmt.Fprintf(w, "solver %s (%s), %.1f ms", o.Solver, status, o.SolveMS)
	if o.Nodes > 0 {
		fmt.Fprintf(w, ", %d nodes", o.Nodes)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "step embedding time %.1f ns, lower bound %.1f ns (%s), gap %.3f%%\n", o.CostNS, o.Bound, o.BoundKind, 100*o.Gap)
	fmt.Fprintf(w, "load imbalance %.4f", o.LoadImbalance)
	if o.RowSharding != nil {
		fmt.Fprintf(w, " (row sharding: %.4f, step time %.1f ns)", o.RowSharding.LoadImbalance, o.RowSharding.CostNS)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "HBM per chip: max %s of %s\n\n", bytesString(float64(o.MaxHBMBytesPerChip)), bytesString(float64(o.HBMBytesPerChip)))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSTRATEGY\tCOLUMN SHARDS\tROW PARTS\tSHARD -> SPARSECORE")
	for _, l := range o.Layouts {
		var parts []string
		for _, si := range l.Shards {
			s := o.Shards[si]
			var b strings.Builder
			if l.RowParts > 1 {
				fmt.Fprintf(&b, "r%d", s.RowPart)
			}
			if l.ColSplits > 1 {
				fmt.Fprintf(&b, "[%d,%d)", s.ColFrom, s.ColTo)
			}
			if b.Len() == 0 {
				b.WriteString("all")
			}
			fmt.Fprintf(&b, "->%d", s.SparseCore)
			parts = append(parts, b.String())
		}
		rows := fmt.Sprint(l.RowParts)
		if l.RowParts > 1 {
			rows += " " + l.RowDist.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", l.Table, l.Strategy, l.ColSplits, rows, strings.Join(parts, " "))
	}
	tw.Flush()
	fmt.Fprintln(w)

	count := make([]int, o.SparseCores)
	for _, s := range o.Shards {
		count[s.SparseCore]++
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SPARSECORE\tCHIP\tSHARDS\tBYTES/STEP\tTIME ns\t")
	for j := 0; j < o.SparseCores; j++ {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%.1f\t\n", j, j/o.SparseCoresPerChip, count[j], bytesString(o.SparseCoreBytes[j]), o.SparseCoreTimeNS[j])
	}
	tw.Flush()
}

func bytesString(b float64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%.1f B", b)
	}
	div, exp := float64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", b/div, "KMGTPE"[exp])
}

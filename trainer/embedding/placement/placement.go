package placement

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
)

// Slice is what a job's slice is planned with, besides its chips.
type Slice struct {
	// Chip is the emulated chip: its SparseCores, HBM bandwidth, access
	// granularity and per-lookup and per-shard overheads, which the
	// partitioner prices as the step-time model does.
	Chip steptime.Chip
	// HBMBytesPerChip bounds the embedding tables per chip.
	HBMBytesPerChip int64
	// Batch is the global batch: every host's batch of a step.
	Batch int
	// Seed seeds the heuristic, so the same job compiles the same plan.
	Seed uint64
}

// Features is what feedback-directed partitioning knows of a model's
// sparse features: each one's key (FeatureKeys; the zero key: none) and the
// statistics the store had for them.
type Features struct {
	Keys  []canon.Key
	Stats map[canon.Key]fdp.Statistics
}

// FeatureKeys returns the statistics-store key of each sparse input of f:
// the component key of the computation producing it (see
// trainer/embedding/fdp), parsed from the read solution's inputs, where it
// enters the job. An input without one (an older sigd) has the zero key:
// no statistics are read or published for it. A key that does not parse
// is an error naming the input: the solution is not one the job can train
// from.
func FeatureKeys(inputs []*sigv1.InputSolution, f model.Features) ([]canon.Key, error) {
	keys := make([]canon.Key, len(f.Sparse))
	for k, i := range f.Sparse {
		if i >= len(inputs) || inputs[i].GetComponentKey() == "" {
			continue
		}
		key, err := canon.ParseKey(inputs[i].GetComponentKey())
		if err != nil {
			return nil, fmt.Errorf("read solution: input %q: component_key: %w", inputs[i].GetInput(), err)
		}
		keys[k] = key
	}
	return keys, nil
}

// Problem is the partitioning problem of a slice of chips: the model's
// tables, with measured statistics where f has them; with is how many.
func (s Slice) Problem(chips int, m model.Config, f Features) (p *partition.Problem, with int) {
	topo := partition.Topology{Chips: chips, SparseCoresPerChip: s.Chip.SparseCoresPerChip,
		HBMBytesPerChip: s.HBMBytesPerChip, HBMBandwidth: s.Chip.HBMBandwidth,
		AccessGranularity: s.Chip.AccessGranularity, LookupOverheadNS: s.Chip.LookupOverheadNS, ShardOverheadNS: s.Chip.ShardOverheadNS}
	tables := m.Tables()
	for k := range tables {
		if k >= len(f.Keys) {
			break
		}
		if st, ok := f.Stats[f.Keys[k]]; ok {
			if ms := st.Measured(tables[k].Vocab, s.Batch); ms != nil {
				tables[k].Measured = ms
				with++
			}
		}
	}
	return &partition.Problem{Tables: tables, Topology: topo, BatchSize: s.Batch}, with
}

// Solve solves the partitioning of a slice of chips for phase (the
// partitioner's heuristic, seeded by Seed, so a restarted controller
// compiles the same plan). Out of memory and an invalid problem are the
// partitioner's errors (partition.ErrOutOfMemory, ErrInvalidProblem).
func (s Slice) Solve(chips int, phase string, m model.Config, f Features) (*partition.Plan, *PlanReport, error) {
	p, with := s.Problem(chips, m, f)
	plan, err := partition.Solve(p, partition.Options{Solver: partition.Heuristic, Seed: s.Seed})
	if err != nil {
		return nil, nil, err
	}
	rep := &PlanReport{Phase: phase, Chips: chips, SparseCores: plan.SparseCores, Solver: plan.Solver,
		TablesWithStatistics: with, CostNS: plan.CostNS, LoadImbalance: plan.LoadImbalance, Plan: plan}
	rep.Layouts = Layouts(plan)
	return plan, rep, nil
}

// Layouts says how a plan splits each table ("query_ids: row 4 cyclic").
func Layouts(plan *partition.Plan) []string {
	var out []string
	for _, l := range plan.Layouts {
		s := fmt.Sprintf("%s: %s", l.Table, l.Strategy)
		if l.ColSplits > 1 {
			s += fmt.Sprintf(" %d cols", l.ColSplits)
		}
		if l.RowParts > 1 {
			s += fmt.Sprintf(" %d %s", l.RowParts, l.RowDist)
		}
		out = append(out, s)
	}
	return out
}

// LayoutsText is a plan's layouts on one line.
func LayoutsText(ls []string) string {
	s := append([]string(nil), ls...)
	sort.Strings(s)
	return strings.Join(s, "; ")
}

package placement

import (
	"fmt"

	"github.com/sigdata/sig/trainer/embedding/partition"
)

// PlanReport is one compiled partition plan.
type PlanReport struct {
	Phase       string `json:"phase"`
	Chips       int    `json:"chips"`
	SparseCores int    `json:"sparsecores"`
	Solver      string `json:"solver"`
	// TablesWithStatistics is how many tables the partitioner planned from
	// measured statistics (the rest from the compile-time assumption:
	// valency 1, uniform access).
	TablesWithStatistics int `json:"tables_with_statistics"`
	// CostNS and LoadImbalance are the plan's modelled SparseCore time per
	// step and Eq. 1 load imbalance, under the statistics it was planned
	// with.
	CostNS        float64 `json:"cost_ns"`
	LoadImbalance float64 `json:"load_imbalance"`
	// Layouts says, per table, how it is split ("query_ids: row 4 cyclic").
	Layouts []string        `json:"layouts"`
	Plan    *partition.Plan `json:"plan"`
}

// Text is the plan's line of a run's report.
func (p PlanReport) Text() string {
	return fmt.Sprintf("plan %-9s %d chips: %d of %d tables from measured statistics, modelled load imbalance %.3f, %.0f ns/step; %s\n",
		p.Phase, p.Chips, p.TablesWithStatistics, len(p.Layouts), p.LoadImbalance, p.CostNS, LayoutsText(p.Layouts))
}

// FDPReport is what feedback-directed partitioning did in a run.
type FDPReport struct {
	// StatisticsRead is how many of the model's features had statistics in
	// the store at setup.
	StatisticsRead int `json:"statistics_read"`
	// ProfiledBatches were sampled (fdp.Sampled) and profiled.
	ProfiledBatches uint64 `json:"profiled_batches"`
	// Published counts feature statistics sent to the store.
	Published int `json:"published"`
	// ProfiledLoadImbalance is Eq. 1 over the per-SparseCore bytes of the
	// profiled steps under the last plan (the "load imbalance information"
	// the paper's profiler records).
	ProfiledLoadImbalance float64 `json:"profiled_load_imbalance"`
}

// Text is feedback-directed partitioning's line of a run's report.
func (r FDPReport) Text() string {
	return fmt.Sprintf("feedback-directed partitioning: statistics for %d features read, %d batches profiled, %d feature statistics published\n",
		r.StatisticsRead, r.ProfiledBatches, r.Published)
}

package trainer

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/model"
)

// This file is the controller's side of the embedding partitioner and of
// feedback-directed partitioning (paper V.A, V.C, VII.D): at setup it reads
// the statistics of the model's features from sigd's statistics store; at
// each compile it solves the partitioning problem of the slice with them
// (the partitioner's heuristic; out of memory is a permanent hold); each
// step it profiles the batch when fdp.Sampled says so; at each committed
// checkpoint it publishes what it profiled.

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

// FDPReport is what feedback-directed partitioning did in the run.
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

// featureKeys returns the statistics-store key of each sparse input: the
// component key of the computation producing it (see trainer/embedding/fdp),
// parsed from the read solution, where it enters the controller. An input
// without one (an older sigd) has the zero key: no statistics are read or
// published for it. A key that does not parse is an error naming the
// input: the solution is not one the job can train from.
func featureKeys(sol *solution, f model.Features) ([]canon.Key, error) {
	ins := sol.sol.GetInputs()
	keys := make([]canon.Key, len(f.Sparse))
	for k, i := range f.Sparse {
		if i >= len(ins) || ins[i].GetComponentKey() == "" {
			continue
		}
		key, err := canon.ParseKey(ins[i].GetComponentKey())
		if err != nil {
			return nil, fmt.Errorf("read solution: input %q: component_key: %w", ins[i].GetInput(), err)
		}
		keys[k] = key
	}
	return keys, nil
}

// readStatistics gets the statistics of the features from the store. A
// failure is not fatal: the partitioner plans without them.
func (c *Controller) readStatistics(ctx context.Context, keys []canon.Key) map[canon.Key]fdp.Statistics {
	if c.fstats == nil || len(keys) == 0 {
		return nil
	}
	var ask []string
	for _, k := range keys {
		if k != (canon.Key{}) {
			ask = append(ask, k.String())
		}
	}
	resp, err := c.fstats.GetFeatureStatistics(ctx, &sigv1.GetFeatureStatisticsRequest{Features: ask})
	if err != nil {
		c.log.Warn("feature statistics: planning without them", "err", err)
		return nil
	}
	out := map[canon.Key]fdp.Statistics{}
	for _, st := range resp.GetStats() {
		s, err := fdp.FromProto(st)
		if err != nil {
			c.log.Warn("feature statistics: skipping one", "err", err)
			continue
		}
		out[s.Feature] = s
	}
	c.log.Info("feature statistics", "features", len(keys), "found", len(out))
	return out
}

// newProfiler profiles the model's sparse inputs (nil without a store).
func (c *Controller) newProfiler() *fdp.Profiler {
	if c.fstats == nil || c.cfg.ProfileRate < 0 || c.dev.model == nil {
		return nil
	}
	cfg := c.dev.model.Config()
	var ts []fdp.Table
	for k := range cfg.Features.Sparse {
		ts = append(ts, fdp.Table{Feature: c.featKeys[k], Vocab: cfg.Shape(k).Vocab})
	}
	return fdp.NewProfiler(ts)
}

// partitionProblem is the slice's partitioning problem: the model's tables,
// with measured statistics where the store had them.
func (c *Controller) partitionProblem(chips int) (*partition.Problem, int) {
	dev := c.cfg.Device
	topo := partition.Topology{Chips: chips, SparseCoresPerChip: dev.SparseCoresPerChip,
		HBMBytesPerChip: c.cfg.HBMBytesPerChip, HBMBandwidth: dev.HBMBandwidth,
		AccessGranularity: dev.AccessGranularity, LookupOverheadNS: dev.LookupOverheadNS, ShardOverheadNS: dev.ShardOverheadNS}
	batch := c.cfg.Hosts * c.cfg.BatchSize
	tables := c.dev.model.Config().Tables()
	with := 0
	for k := range tables {
		if k >= len(c.featKeys) {
			break
		}
		if st, ok := c.featStats[c.featKeys[k]]; ok {
			if m := st.Measured(tables[k].Vocab, batch); m != nil {
				tables[k].Measured = m
				with++
			}
		}
	}
	return &partition.Problem{Tables: tables, Topology: topo, BatchSize: batch}, with
}

// solvePlan solves the slice's partitioning (the heuristic, seeded by the
// job's seed, so a restarted controller compiles the same plan).
func (c *Controller) solvePlan(chips int, phase control.Phase) (*partition.Plan, *PlanReport, error) {
	p, with := c.partitionProblem(chips)
	plan, err := partition.Solve(p, partition.Options{Solver: partition.Heuristic, Seed: c.cfg.Seed})
	if err != nil {
		return nil, nil, err
	}
	rep := &PlanReport{Phase: phase.String(), Chips: chips, SparseCores: plan.SparseCores, Solver: plan.Solver,
		TablesWithStatistics: with, CostNS: plan.CostNS, LoadImbalance: plan.LoadImbalance, Plan: plan}
	rep.Layouts = planLayouts(plan)
	return plan, rep, nil
}

// planLayouts says how a plan splits each table ("query_ids: row 4 cyclic").
func planLayouts(plan *partition.Plan) []string {
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

// publishStatistics sends what the profiler collected since the last call
// to the store (at a committed checkpoint: paper V.C, "the database of
// statistics is continuously updated"). Called with deviceMu held; the RPC
// runs in its own goroutine.
func (c *Controller) publishStatistics(ctx context.Context) {
	if c.dev.prof == nil || c.dev.prof.Batches() == 0 {
		return
	}
	li := c.dev.prof.LoadImbalance()
	stats := c.dev.prof.Statistics(c.cfg.Pipeline)
	req := &sigv1.PutFeatureStatisticsRequest{}
	for _, s := range stats {
		if s.Feature != (canon.Key{}) {
			req.Stats = append(req.Stats, s.Proto())
		}
	}
	if len(req.Stats) == 0 {
		return
	}
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rpcTimeout)
		defer cancel()
		_, err := c.fstats.PutFeatureStatistics(rctx, req)
		if err != nil {
			c.log.Warn("publish feature statistics", "err", err)
			return
		}
		c.log.Info("feature statistics published", "features", len(req.Stats), "batches", req.Stats[0].GetBatches())
		c.post(msg{fn: func() {
			c.fdpRep.Published += len(req.Stats)
			c.fdpRep.ProfiledLoadImbalance = li
		}})
	}()
}

// layoutsText is a plan's layouts on one line.
func layoutsText(ls []string) string {
	s := append([]string(nil), ls...)
	sort.Strings(s)
	return strings.Join(s, "; ")
}

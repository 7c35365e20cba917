package trainer

import (
	"context"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/embedding/placement"
	"github.com/sigdata/sig/trainer/steptime"
)

// renamedCTR is ctr_small's three features under other names, in another
// order, with the commutative intersect's operands swapped: the same
// components (the same Merkle keys), a different pipeline.
const renamedCTR = `
let q = unigrams(lower(col("query")))
let t = unigrams(lower(col("ad_title")))
input price       = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
input overlap     = concat(intersect(t, q), col("ad_category"))
input query_terms = hash(q, buckets=1000003)
`

// TestFeedbackDirectedPartitioning shows feedback-directed partitioning
// (paper V.C, VII.D) end to end against a real sigd: model 1 trains with no
// statistics in the store, so its partitioner plans from the compile-time
// assumption (valency 1, uniform access); it profiles ~3% of its batches and
// publishes per-feature statistics at each committed checkpoint. Model 2, a
// different pipeline whose graph names the same features differently, reads
// them at setup and gets a plan whose modelled SparseCore time and load
// imbalance under the measured statistics beat both model 1's initial plan
// and the plan model 2 would get without statistics; its real lookups,
// over the same events, are better balanced too.
//
// The slice prices a shard at 20 ns and a row slice at 0.1 ns per step
// (steptime and partition alike): with free shards, splitting every table
// over every SparseCore is always best and valency would not matter.
func TestFeedbackDirectedPartitioning(t *testing.T) {
	e := newEnv(t, 6, 1500, sigd.Options{})
	run := func(pipeline, dsl string) Report {
		cfg := e.jobConfig(t, pipeline)
		if dsl != "" {
			cfg.Graph = dsl
		}
		cfg.Device = steptime.Model{Chip: steptime.Chip{ShardOverheadNS: 20, LookupOverheadNS: 0.1}, TimeScale: 2e5}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		rep, err := RunJob(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Exit != "done" || len(rep.Partition) == 0 || len(rep.Phases) == 0 {
			t.Fatalf("%s: exit %s, %d plans, %d phases", pipeline, rep.Exit, len(rep.Partition), len(rep.Phases))
		}
		return rep
	}
	r1 := run("fdp_first", "")
	if r1.Partition[0].TablesWithStatistics != 0 || r1.FDP.StatisticsRead != 0 {
		t.Fatalf("model 1 found statistics in an empty store: %+v", r1.FDP)
	}
	if r1.FDP.ProfiledBatches == 0 || r1.FDP.Published < 3 || r1.FDP.ProfiledBatches*10 > r1.StepsRun {
		t.Fatalf("model 1 profiled %d of %d batches and published %d statistics", r1.FDP.ProfiledBatches, r1.StepsRun, r1.FDP.Published)
	}

	// The store has the three features, keyed by component key.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := map[string]map[string]canon.Key{} // pipeline -> input -> component key
	for _, p := range []string{"fdp_first", "fdp_second"} {
		keys[p] = map[string]canon.Key{}
	}
	key := func(in *sigv1.InputSolution) canon.Key {
		t.Helper()
		k, err := canon.ParseKey(in.GetComponentKey())
		if err != nil {
			t.Fatalf("input %s: %v", in.GetInput(), err)
		}
		return k
	}
	sol1, err := e.sigd.SIG(t, "ctr").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "fdp_first", Range: e.w.All()})
	if err != nil {
		t.Fatal(err)
	}
	var ask []string
	for _, in := range sol1.GetInputs() {
		keys["fdp_first"][in.GetInput()] = key(in)
		ask = append(ask, in.GetComponentKey())
	}
	got, err := sigv1.NewFeatureStatsClient(e.sigd.Dial(t, "operator")).GetFeatureStatistics(ctx, &sigv1.GetFeatureStatisticsRequest{Features: ask})
	if err != nil {
		t.Fatal(err)
	}
	stats := map[canon.Key]fdp.Statistics{}
	for _, st := range got.GetStats() {
		s, err := fdp.FromProto(st)
		if err != nil {
			t.Fatal(err)
		}
		stats[s.Feature] = s
		t.Logf("statistics %.12s… (model %s): %d batches of %d, mean valency %.2f, %.0f unique rows per batch, %d hot rows, zipf %.2f",
			st.GetFeature(), st.GetModel(), st.GetBatches(), st.GetBatchSize(), st.GetMeanValency(), st.GetMeanUniquePerBatch(), len(st.GetHotRows()), st.GetZipfS())
	}
	if len(stats) != 3 {
		t.Fatalf("store has statistics for %d of 3 features", len(stats))
	}

	r2 := run("fdp_second", renamedCTR)
	if r2.FDP.StatisticsRead != 3 || r2.Partition[0].TablesWithStatistics != 3 {
		t.Fatalf("model 2 planned with %d of 3 tables' statistics (%d read)", r2.Partition[0].TablesWithStatistics, r2.FDP.StatisticsRead)
	}
	sol2, err := e.sigd.SIG(t, "ctr").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "fdp_second", Range: e.w.All()})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range sol2.GetInputs() {
		keys["fdp_second"][in.GetInput()] = key(in)
	}

	// The slice's problem (4 chips, batch 256) for a plan's tables, under
	// the compile-time assumption (valency 1, uniform access).
	problem := func(plan *partition.Plan) *partition.Problem {
		p := &partition.Problem{BatchSize: 256, Topology: partition.Topology{Chips: 4, SparseCoresPerChip: 4,
			HBMBytesPerChip: 32 << 30, ShardOverheadNS: 20, LookupOverheadNS: 0.1}}
		for _, l := range plan.Layouts {
			p.Tables = append(p.Tables, partition.Table{Name: l.Table, Vocab: l.Vocab, Dim: l.Dim,
				Optimizer: partition.Optimizer{Name: "sgd", ElementWise: true}, Valency: partition.Valency{Mean: 1}})
		}
		return p
	}
	// Every plan judged under the measured statistics: the truth as far as
	// anyone knows it.
	judge := func(pipeline string, plan *partition.Plan) *partition.Plan {
		t.Helper()
		p := problem(plan)
		for i := range p.Tables {
			tb := &p.Tables[i]
			st, ok := stats[keys[pipeline][tb.Name]]
			if !ok {
				t.Fatalf("%s: no statistics for %s", pipeline, tb.Name)
			}
			tb.Measured = st.Measured(tb.Vocab, 256)
		}
		cp := *plan
		if err := partition.Evaluate(p, &cp); err != nil {
			t.Fatal(err)
		}
		return &cp
	}
	initial1 := r1.Partition[0]
	withFDP := r2.Partition[0]
	// What model 2 would have run without statistics: the same tables, in
	// its order, planned from the compile-time assumption.
	noStats, err := partition.Solve(problem(withFDP.Plan), partition.Options{Seed: 0})
	if err != nil {
		t.Fatal(err)
	}
	a := judge("fdp_first", initial1.Plan)
	b := judge("fdp_second", noStats)
	c := judge("fdp_second", withFDP.Plan)
	t.Logf("modelled under the measured statistics (16 SparseCores, batch 256):")
	for _, x := range []struct {
		name string
		p    *partition.Plan
		lay  []string
	}{{"model 1, initial plan (no statistics)", a, initial1.Layouts}, {"model 2 without statistics", b, placement.Layouts(noStats)}, {"model 2 with FDP", c, withFDP.Layouts}} {
		t.Logf("  %-38s SparseCore %7.1f ns/step, load imbalance %.3f  %s", x.name, x.p.CostNS, x.p.LoadImbalance, placement.LayoutsText(x.lay))
	}
	if !(c.CostNS < a.CostNS && c.CostNS < b.CostNS) {
		t.Errorf("FDP plan's modelled SparseCore time %.1f ns is not below model 1's initial plan (%.1f) and the no-statistics plan (%.1f)", c.CostNS, a.CostNS, b.CostNS)
	}
	if !(c.LoadImbalance < a.LoadImbalance) {
		t.Errorf("FDP plan's modelled load imbalance %.3f is not below model 1's initial plan's %.3f", c.LoadImbalance, a.LoadImbalance)
	}
	// The real lookups of the initial phase, over the same events.
	p1, p2 := r1.Phases[0], r2.Phases[0]
	t.Logf("real lookups, initial phase: model 1 load imbalance %.3f, SparseCore %.1f ns/step, device %.1f ns/step; model 2 %.3f, %.1f ns/step, device %.1f ns/step",
		p1.LoadImbalance, p1.SparseCoreNSPerStep, p1.DeviceNSPerStep, p2.LoadImbalance, p2.SparseCoreNSPerStep, p2.DeviceNSPerStep)
	if !(p2.SparseCoreNSPerStep < p1.SparseCoreNSPerStep) {
		t.Errorf("model 2's real steps take %.1f SparseCore ns, model 1's %.1f", p2.SparseCoreNSPerStep, p1.SparseCoreNSPerStep)
	}
}

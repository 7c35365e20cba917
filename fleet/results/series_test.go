package results_test

import (
	"strings"
	"testing"

	"github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/fleet/results"
)

// TestSeries: the curves are the epochs' own figures: the amortization
// ratio cumulative and per epoch, hit rates per epoch and cumulative, and
// the targets met or not from them, with the CPU target's floor named.
func TestSeries(t *testing.T) {
	epochs := []results.Epoch{
		{Epoch: 0, Submitted: 10, Active: 10, Initial: results.Counts{Components: 10, ComponentHits: 5, Blocks: 100, BlockHits: 50},
			Cumulative: results.CPU{Worker: 8, SIGReader: 2, LIGReader: 10, Examples: 1000}},
		{Epoch: 1, Submitted: 30, Active: 25, Initial: results.Counts{Components: 20, ComponentHits: 20, Blocks: 200, BlockHits: 190},
			CaughtUp:   results.Counts{Components: 10, ComponentHits: 10, Blocks: 100, BlockHits: 100},
			Cumulative: results.CPU{Worker: 10, SIGReader: 6, LIGReader: 40, Examples: 4000}},
	}
	a := results.NewAmortization(epochs)
	if len(a) != 2 || a[0].Ratio != 1 || a[0].EpochRatio != 1 || a[1].Pipelines != 30 || a[1].SIGSeconds != 16 || a[1].Ratio != 0.4 ||
		a[1].EpochRatio != 6.0/30 {
		t.Errorf("amortization %+v", a)
	}
	h := results.NewHitRates(epochs)
	if len(h) != 2 || h[0].BlockHitRate != 0.5 || h[1].BlockHitRate != 290.0/300 || h[1].InitialBlockHitRate != 0.95 ||
		h[1].CaughtUpBlockHitRate != 1 || h[1].CumulativeBlockHitRate != 340.0/400 || h[1].ComponentHitRate != 1 {
		t.Errorf("hit rates %+v", h)
	}
	r := &results.Results{Epochs: epochs, CPU: epochs[1].Cumulative, SteadyState: results.NewSteadyState(epochs),
		Reuse: results.Reuse{Pipelines: 30, Sigd: results.NewDistribution([]int64{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})}}
	tg := results.NewTargets(r)
	if len(tg) != 6 || !tg[0].Met || tg[0].Measured != 290.0/300 || tg[1].Met || tg[1].Measured != 12 || tg[2].Met || tg[2].Measured != 0.4 ||
		!strings.Contains(tg[1].Note, "30 pipelines") || !strings.Contains(tg[2].Note, "0.150") {
		t.Errorf("targets %+v", tg)
	}
	// A run without MinIO's CPU split or request counts has those
	// targets, not measured.
	for _, i := range []int{3, 4, 5} {
		if !tg[i].NotMeasured || tg[i].Met || !strings.Contains(tg[i].Note, "not measured") {
			t.Errorf("target %d: %+v", i, tg[i])
		}
	}
	var b strings.Builder
	r.Targets, r.HitRates, r.Amortization = tg, h, a
	if err := r.WriteSummary(&b); err != nil || !strings.Contains(b.String(), "SIG reader alone / LIG reader 0.150") {
		t.Errorf("summary (%v):\n%s", err, b.String())
	}
}

// TestReuseSweepMarksTheRun: the sweep plans the run's own configuration
// among the others, and its point is the plan of the fleet itself.
func TestReuseSweepMarksTheRun(t *testing.T) {
	cfg := gen.Config{Seed: 2, Pipelines: 30, Epochs: 4, FirstEpoch: 5}.EnsureDefaults()
	pts, err := results.NewReuseSweep(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan := f.Plan()
	runs := 0
	for _, p := range pts {
		if p.Run {
			runs++
			if p.ReuseMean != plan.ReuseMean || p.ReuseMax != plan.ReuseMax || p.Pipelines != 30 {
				t.Errorf("%+v, the plan: mean %v max %d", p, plan.ReuseMean, plan.ReuseMax)
			}
		}
	}
	if runs != 3 { // zipf 1, variants 3 and 30 pipelines are the run's
		t.Errorf("%d points are the run's, want 3: %+v", runs, pts)
	}
}

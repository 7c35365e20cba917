package results_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigdata/sig/fleet/results"
)

func TestDistribution(t *testing.T) {
	// 2 blocks used by 0, 5 by 1, 2 by 3, 1 by 10.
	d := results.NewDistribution([]int64{2, 5, 0, 2, 0, 0, 0, 0, 0, 0, 1})
	if d.Blocks != 10 || d.Mean != (5+6+10)/10.0 || d.Max != 10 || d.P50 != 1 || d.P90 != 3 || d.P99 != 10 {
		t.Fatalf("%+v", d)
	}
	if e := results.NewDistribution(nil); e.Blocks != 0 || e.Mean != 0 {
		t.Fatalf("empty: %+v", e)
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	var xs []float64
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	p := results.NewPercentiles(xs)
	if p.N != 100 || p.P50 != 50 || p.P90 != 90 || p.P95 != 95 || p.P99 != 99 || p.Mean != 50.5 {
		t.Fatalf("%+v", p)
	}
}

// TestTableIIsLinearInItsConstants: Table I's ratio is measured CPU per
// example times the modelled examples/s over the modelled host cores, so
// the sensitivity rows scale it exactly.
func TestTableIIsLinearInItsConstants(t *testing.T) {
	ps := []results.Pipeline{
		{Pipeline: "a", Initial: results.Reads{Examples: 1000, SIGSeconds: 0.001, LIGSeconds: 0.004},
			CaughtUp: results.Reads{Examples: 500, SIGSeconds: 0.0005, LIGSeconds: 0.003}},
	}
	c := results.DefaultConstants()
	c.HostCores.Value, c.ExamplesPerSecond.Value = 10, 1e6
	tab := results.NewTableI(ps, c)
	// SIG: 1e-6 s/example * 1e6 examples/s / 10 cores = 0.1; LIG caught
	// up: 6e-6 * 1e6 / 10 = 0.6.
	if !near(tab.SIGInitial.P50, 0.1) || !near(tab.LIGCaughtUp.P50, 0.6) || !near(tab.LIGInitial.P50, 0.4) {
		t.Fatalf("%+v", tab)
	}
	for _, row := range tab.Sensitivity {
		f := (row.ExamplesPerSecond / 1e6) / (row.HostCores / 10)
		if !near(row.SIGInitial.P50, 0.1*f) || !near(row.LIGCaughtUp.P50, 0.6*f) {
			t.Errorf("%s: %+v", row.Label, row)
		}
	}
}

func TestFigure6(t *testing.T) {
	c := results.DefaultConstants()
	c.ExamplesPerSecond.Value, c.ChipsPerHost.Value, c.ChipHourUSD.Value, c.CoreHourUSD.Value = 1000, 4, 3600, 3600
	ps := []results.Pipeline{{Pipeline: "a", Initial: results.Reads{Examples: 1000, SIGSeconds: 1, LIGSeconds: 8}, WorkerShare: 1}}
	f := results.NewFigure6(ps, c)
	r := f.Rows[0]
	// 1000 examples at 1000/s on 4 chips at 1 USD a chip-second: 4;
	// CPU at 1 USD a core-second.
	if !near(r.Accelerator, 4) || !near(r.SIG(), 6) || !near(r.LIG(), 12) || !near(f.ReaderReductionGeoMean, 4) || !near(f.TotalReductionGeoMean, 0.5) {
		t.Fatalf("%+v %+v", r, f)
	}
	// At 10x the examples/s the accelerator costs 0.4: 1 - 2.4/8.4.
	for _, v := range f.Sensitivity {
		if v.Label == "examples/s x10" && (v.ExamplesPerSecond != 10000 || !near(v.TotalReductionGeoMean, 1-2.4/8.4)) {
			t.Errorf("%+v", v)
		}
	}
	if len(f.Sensitivity) != 5 {
		t.Errorf("%d sensitivity rows", len(f.Sensitivity))
	}
}

func TestReadRefusesAnotherSchema(t *testing.T) {
	dir := t.TempDir()
	r := &results.Results{Schema: results.SchemaVersion}
	p := filepath.Join(dir, "r.json")
	if err := r.Write(p); err != nil {
		t.Fatal(err)
	}
	if _, err := results.Read(p); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte(`{"schema": "sig.fleet.results/v0"}`), 0o644)
	if _, err := results.Read(p); err == nil || !strings.Contains(err.Error(), "sig.fleet.results/v0") {
		t.Fatalf("%v", err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

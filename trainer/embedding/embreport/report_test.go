package embreport

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sigdata/sig/internal/figure"
)

// TestReportSmall runs the whole report on two small models: the ladder's
// rungs come in order with the baseline at 1, pipelining never slows the
// same plan down, the profiled plan is at least as good as the
// compile-time one under the profiled statistics, and the parameter
// servers make exactly the RPCs each mode promises.
func TestReportSmall(t *testing.T) {
	o := Options{Models: []string{"A", "b"}, Chips: 2, BatchPerChip: 32, Elements: 1 << 20, Steps: 2,
		ProfileSteps: 100, PSServers: 3, PSCores: 4, CaughtUpChips: 1, PSElements: 1 << 18, PSSteps: 2}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Models) != 2 || rep.Models[0].Model != "A" || rep.Models[1].Model != "B" {
		t.Fatalf("models: %+v", rep.Models)
	}
	for _, m := range rep.Models {
		want := []string{Baseline, Pipelining, Hybrid, FDP}
		if len(m.Configs) != len(want) {
			t.Fatalf("model %s: %d configs", m.Model, len(m.Configs))
		}
		for i, c := range m.Configs {
			if c.Config != want[i] {
				t.Errorf("model %s: config %d = %s, want %s", m.Model, i, c.Config, want[i])
			}
			if c.DeviceUS <= 0 || c.TensorCoreUS <= 0 || c.SparseCoreUS <= 0 {
				t.Errorf("model %s %s: non-positive times %+v", m.Model, c.Config, c)
			}
			if c.MeasuredLoadImbalance < 1-1e-9 || c.ModelledLoadImbalance < 1-1e-9 {
				t.Errorf("model %s %s: load imbalance below 1: %+v", m.Model, c.Config, c)
			}
		}
		base, pipe, hyb, fdp := m.Configs[0], m.Configs[1], m.Configs[2], m.Configs[3]
		if base.Speedup != 1 || base.Mode != "serialized" || pipe.Mode != "pipelined" {
			t.Errorf("model %s: baseline %+v, pipelining %+v", m.Model, base, pipe)
		}
		if pipe.DeviceUS > base.DeviceUS {
			t.Errorf("model %s: pipelining the same plan is slower: %v > %v us", m.Model, pipe.DeviceUS, base.DeviceUS)
		}
		if fdp.ModelledCostUS > hyb.ModelledCostUS*1.0001 {
			t.Errorf("model %s: the FDP plan costs more than the compile-time plan under the profiled statistics: %v > %v us",
				m.Model, fdp.ModelledCostUS, hyb.ModelledCostUS)
		}
		if m.ProfiledBatches == 0 || m.ProfiledBatches > 20 {
			t.Errorf("model %s: %d of 100 batches profiled, want about 3%%", m.Model, m.ProfiledBatches)
		}
		p := m.PS
		if p == nil {
			t.Fatalf("model %s: no parameter-server comparison", m.Model)
		}
		// Uncoalesced: a Lookup and an Apply per core, table and server
		// (paper V.B); coalesced: one pair per server.
		if want := float64(2 * o.PSCores * p.Tables * o.PSServers); p.Uncoalesced.RPCs != want {
			t.Errorf("model %s: uncoalesced RPCs per step %v, want %v", m.Model, p.Uncoalesced.RPCs, want)
		}
		if want := float64(2 * o.PSServers); p.Coalesced.RPCs != want {
			t.Errorf("model %s: coalesced RPCs per step %v, want %v", m.Model, p.Coalesced.RPCs, want)
		}
	}
	var txt, js bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Figure 7", "+pipelining", "+FDP", "coalesced", "geometric mean"} {
		if !strings.Contains(txt.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, txt.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Models) != 2 || back.Models[1].Configs[3].Config != FDP || back.GeomeanFinal != rep.GeomeanFinal {
		t.Errorf("JSON round trip: %+v", back)
	}
	checkFigures(t, rep)
	if !strings.Contains(txt.String(), "MODELLED") || !strings.Contains(txt.String(), "by shard overhead") ||
		!strings.Contains(txt.String(), "shard_overhead_ns") {
		t.Errorf("text report does not label Figure 7 or show its sweeps:\n%s", txt.String())
	}
}

// checkFigures: every figure is labelled (figure.Set.Check); Figure 7's are
// modelled, list the shard overhead as a guess and sweep it (0, 250, 1000,
// 4000 ns) and the contention, and the sweeps' points at the configured
// values give the figures' own values: the sweep is the same computation
// with one constant changed. The coalescing speedups are measured.
func checkFigures(t *testing.T, rep *Report) {
	t.Helper()
	if err := rep.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	names := []string{FigGeomean}
	for _, m := range rep.Models {
		names = append(names, FigSpeedup+m.Model, FigPipelining+m.Model, FigHybridGain+m.Model, FigFDPGain+m.Model)
	}
	for _, name := range names {
		f, ok := rep.Figures[name]
		if !ok {
			t.Fatalf("no figure %s", name)
		}
		if f.Kind != figure.Modelled || !strings.HasPrefix(f.Constants["shard_overhead_ns"].Source, figure.Guess) {
			t.Errorf("%s: %s, shard overhead %+v", name, f.Kind, f.Constants["shard_overhead_ns"])
		}
		var ats []float64
		for _, p := range f.SweepOf("shard_overhead_ns") {
			ats = append(ats, p.At)
			if p.At == rep.ShardNS && math.Abs(p.Value-f.Value) > 1e-9*f.Value {
				t.Errorf("%s: sweep at the configured %g ns gives %g, the figure %g", name, p.At, p.Value, f.Value)
			}
		}
		if !slices.Equal(ats, []float64{0, 250, 1000, 4000}) {
			t.Errorf("%s: shard overheads swept %v", name, ats)
		}
		for _, p := range f.SweepOf("contention") {
			if p.At == rep.Contention && math.Abs(p.Value-f.Value) > 1e-9*f.Value {
				t.Errorf("%s: sweep at the configured contention %g gives %g, the figure %g", name, p.At, p.Value, f.Value)
			}
		}
		if len(f.SweepOf("contention")) != 5 {
			t.Errorf("%s: contention sweep %+v", name, f.SweepOf("contention"))
		}
	}
	if f := rep.Figures[FigStepGeomean]; f.Kind != figure.Measured || f.Value != rep.GeomeanPS {
		t.Errorf("coalescing: %+v", f)
	}
	if f := rep.Figures[FigFDPGain+"B"]; f.Paper == nil || f.Paper.Value != 1.21 {
		t.Errorf("model B's FDP gain without the paper's 21%%: %+v", f.Paper)
	}
}

func TestUnknownModel(t *testing.T) {
	_, err := Run(context.Background(), Options{Models: []string{"Z"}})
	if err == nil || !strings.Contains(err.Error(), `"Z"`) {
		t.Fatalf("err = %v, want unknown model Z", err)
	}
}

// TestGenerateIsSeeded: the models are a pure function of their specs.
func TestGenerateIsSeeded(t *testing.T) {
	for _, m := range Models {
		a, b := m.Generate(30), m.Generate(30)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("model %s table %d differs: %+v vs %+v", m.Name, i, a[i], b[i])
			}
			ta := a[i]
			if ta.Vocab < MinVocab || ta.Vocab > MaxVocab || ta.Dim < 1 || ta.Dim > MaxDim || ta.MaxValency > MaxValency || ta.MeanValency < 1 {
				t.Errorf("model %s table %d outside the paper's ranges: %+v", m.Name, i, ta)
			}
		}
	}
}

// TestSweepIsARerun: a point of the shard-overhead sweep is the whole
// ladder run with that overhead (re-planned, re-run, re-priced), not a
// re-pricing of the configured plans.
func TestSweepIsARerun(t *testing.T) {
	o := Options{Models: []string{"A"}, Chips: 2, BatchPerChip: 32, Elements: 1 << 20, Steps: 2, ProfileSteps: 100, PSSteps: -1}
	swept, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.ShardOverheadNS, o.NoSweeps = 250, true
	direct, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(direct.Models[0].ShardOverheadSweep) != 0 || direct.ShardNS != 250 {
		t.Fatalf("NoSweeps swept, or the overhead is %g", direct.ShardNS)
	}
	var at250 *LadderPoint
	for i, p := range swept.Models[0].ShardOverheadSweep {
		if p.At == 250 {
			at250 = &swept.Models[0].ShardOverheadSweep[i]
		}
	}
	if at250 == nil {
		t.Fatal("no sweep point at 250 ns")
	}
	for i, c := range direct.Models[0].Configs {
		if c.DeviceUS != at250.DeviceUS[i] || c.Speedup != at250.Speedups[i] {
			t.Errorf("%s: run at 250 ns %.4f us (%.4fx), sweep point %.4f us (%.4fx)", c.Config, c.DeviceUS, c.Speedup, at250.DeviceUS[i], at250.Speedups[i])
		}
	}
}

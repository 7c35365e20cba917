package runstats

import (
	"math"
	"testing"
)

// TestPhasesAndChipWeights: 40 steps on 4 chips, then 10 on 1 with the
// tables on parameter servers: each phase reports its own means (the first
// and last 20 losses), the run's step times weigh each step by its chips,
// and StepNS over the phases agrees with the run's totals.
func TestPhasesAndChipWeights(t *testing.T) {
	var s Stats
	for i := range 40 {
		s.Observe("initial", Step{Chips: 4, TensorCore: 10, SparseCore: 20, Device: 30, Examples: 8, Values: 16, Unique: 4,
			Loss: float64(i), SparseCoreBytes: []float64{1, 3}})
	}
	for i := range 10 {
		s.Observe("caught-up", Step{Chips: 1, TensorCore: 50, Servers: 20, Device: 70, Examples: 2, Loss: float64(100 + i)})
	}
	var got [][]float64
	ph := s.Phases(func(b []float64) float64 {
		got = append(got, b)
		return 7
	})
	if len(ph) != 2 || ph[0].Phase != "initial" || ph[1].Phase != "caught-up" {
		t.Fatalf("phases %+v", ph)
	}
	ini, cu := ph[0], ph[1]
	// Losses 0..39: the first 20 average 9.5, the last 20 (20..39) 29.5.
	if ini.Steps != 40 || ini.Examples != 320 || ini.FirstLoss != 9.5 || ini.LastLoss != 29.5 || ini.Chips != 4 ||
		ini.ValuesPerStep != 16 || ini.UniquePerStep != 4 || ini.DeviceNSPerStep != 30 || ini.LoadImbalance != 7 {
		t.Errorf("initial phase %+v", ini)
	}
	if len(got) != 2 || len(got[0]) != 2 || got[0][0] != 40 || got[0][1] != 120 || len(got[1]) != 0 {
		t.Errorf("SparseCore bytes of the phases %v, want [[40 120] []]", got)
	}
	if cu.Steps != 10 || cu.FirstLoss != 104.5 || cu.LastLoss != 104.5 || cu.Chips != 1 || cu.TensorCoreNSPerStep != 50 ||
		cu.SparseCoreNSPerStep != 0 || cu.ServersNSPerStep != 20 || cu.DeviceNSPerStep != 70 || ini.ServersNSPerStep != 0 {
		t.Errorf("caught-up phase %+v", cu)
	}
	tot := s.Totals()
	if tot.Steps != 50 || tot.Examples != 340 || tot.LastLoss != 109 || tot.ChipSteps != 170 {
		t.Errorf("totals %+v", tot)
	}
	// 160 chip-steps of 10 ns and 10 of 50 ns: (1600 + 500) / 170.
	tc, sc, dev := tot.PerChipStep()
	want := [3]float64{2100.0 / 170, 3200.0 / 170, 5500.0 / 170}
	if math.Abs(tc-want[0]) > 1e-9 || math.Abs(sc-want[1]) > 1e-9 || math.Abs(dev-want[2]) > 1e-9 {
		t.Errorf("per chip-step %v %v %v, want %v", tc, sc, dev, want)
	}
	tc2, sc2, srv2, dev2 := StepNS(ph)
	if math.Abs(tc-tc2) > 1e-9 || math.Abs(sc-sc2) > 1e-9 || math.Abs(dev-dev2) > 1e-9 ||
		math.Abs(srv2-200.0/170) > 1e-9 || tot.Servers != 200 {
		t.Errorf("StepNS over the phases %v %v %v %v, the totals %v %v %v %v", tc2, sc2, srv2, dev2, tc, sc, tot.Servers, dev)
	}
	if c := s.LossCurve(); len(c) != 50 || c[49].Step != 50 || c[49].Phase != "caught-up" {
		t.Errorf("loss curve of %d points, last %+v", len(c), c[len(c)-1])
	}
	var empty Stats
	if a, b, c := empty.Totals().PerChipStep(); a != 0 || b != 0 || c != 0 || empty.Phases(nil) != nil {
		t.Error("an empty run reports step times or phases")
	}
}

package fleet

import (
	"math"
	"reflect"
	"testing"
	"time"
)

// TestSimulateDefaults runs the default fleet for a few seeds and checks
// what must hold whatever the numbers: the scheduling goodput the goodput
// package computes equals Table II's training share (both are held chip-time
// over capacity, and jobs hold whole slices), MPG = SG × RG × PG, holds and
// queues are there, and preempted epochs both commit and do not.
func TestSimulateDefaults(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		r, err := Simulate(SimConfig{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		f, tab := r.Goodput.Fleet, r.TableII
		t.Logf("seed %d: %d jobs (%d finished); Table II 1 : %.2f : %.2f (training %.2f of capacity); preempted epochs %d, %.0f%% committed; SG %.3f RG %.3f PG %.3f MPG %.3f",
			seed, r.Jobs, r.Finished, tab.QueuedPerTraining, tab.OnHoldPerTraining, tab.Training,
			r.PreemptedEpochs, 100*r.CommittedFraction(), f.SG, f.RG, f.PG, f.MPG)
		if math.Abs(f.SG-tab.Training) > 1e-3 {
			t.Errorf("SG %.5f, Table II training %.5f", f.SG, tab.Training)
		}
		if math.Abs(f.MPG-f.SG*f.RG*f.PG) > 1e-9 || f.PG > 0.55+1e-6 || f.RG <= 0 || f.RG >= 1 {
			t.Errorf("goodput %+v", f)
		}
		if tab.Training <= 0 || tab.Training > 1 || tab.Queued <= 0 || tab.OnHold <= 0 {
			t.Errorf("Table II %+v", tab)
		}
		if r.PreemptedEpochs == 0 || r.PreemptedCommitted == 0 || r.PreemptedCommitted == r.PreemptedEpochs {
			t.Errorf("preempted epochs %d, committed %d", r.PreemptedEpochs, r.PreemptedCommitted)
		}
		if r.PermanentHolds == 0 || r.TransientHolds == 0 || r.Failures == 0 {
			t.Errorf("holds %d/%d failures %d", r.PermanentHolds, r.TransientHolds, r.Failures)
		}
	}
}

func TestSimulateDeterministic(t *testing.T) {
	cfg := SimConfig{Seed: 9, Duration: Duration(5 * 24 * time.Hour)}
	a, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of one seed differ")
	}
}

// TestNoticeLengthDecidesCommits: a preempted epoch commits when the drain
// and the checkpoint fit in the notice (paper VI.B).
func TestNoticeLengthDecidesCommits(t *testing.T) {
	frac := func(notice time.Duration) float64 {
		var c, n int
		for seed := uint64(1); seed <= 3; seed++ {
			r, err := Simulate(SimConfig{Seed: seed, NoticeMean: Duration(notice), MaintenanceMTBF: Duration(12 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			c, n = c+r.PreemptedCommitted, n+r.PreemptedEpochs
		}
		return float64(c) / float64(n)
	}
	short, long := frac(time.Minute), frac(10*time.Hour)
	if !(short < 0.2 && long > 0.95) {
		t.Fatalf("committed fraction with 1m notices %.2f, with 10h notices %.2f", short, long)
	}
}

func TestSimulateRejectsBadConfig(t *testing.T) {
	for _, c := range []SimConfig{
		{Chips: 64, Slices: []int{128}},
		{InputStall: 1},
		{ProgramGoodput: 2},
	} {
		if _, err := Simulate(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

package trainer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer/accounting/fleet"
	"github.com/sigdata/sig/trainer/accounting/goodput"
)

// TestSharedFleet runs two jobs on a fleet of 4 chips: their 4-chip
// initial slices cannot run at once, so one queues while the other trains
// (whole-slice allocation); caught up, on 2 chips each, they fit together.
// One shared recorder accounts for both, and the fleet report shows the
// queueing as unmet demand.
func TestSharedFleet(t *testing.T) {
	e := newEnv(t, 4, 800, sigd.Options{})
	e.memoize(t, "warm")
	shared := fleet.NewShared(4)
	rec := goodput.NewRecorder(4, time.Now())
	var wg sync.WaitGroup
	reps := make([]Report, 2)
	for i, name := range []string{"fleet-a", "fleet-b"} {
		cfg := e.jobConfig(t, name)
		cfg.Chips, cfg.CaughtUpChips, cfg.EpochUnits = 4, 2, 1
		cfg.Allocator, cfg.FleetChips, cfg.Recorder = shared, 4, rec
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			rep, err := RunJob(ctx, cfg)
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		}()
	}
	wg.Wait()
	for i, rep := range reps {
		if rep.Exit != "done" {
			t.Fatalf("job %d: exit %q", i, rep.Exit)
		}
	}
	checkExactlyOnce(t, e, "fleet-a")
	checkExactlyOnce(t, e, "fleet-b")
	r, err := rec.Report(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 2 {
		t.Fatalf("fleet report has %d jobs", len(r.Jobs))
	}
	unmet := r.Jobs[0].Total.ChipSeconds[goodput.UnmetDemand] + r.Jobs[1].Total.ChipSeconds[goodput.UnmetDemand]
	if unmet <= 0 || r.Fleet.SG <= 0 || r.Fleet.SG > 1 {
		t.Fatalf("unmet demand %.3f chip-s, fleet SG %.3f: no queueing recorded", unmet, r.Fleet.SG)
	}
	if u := shared.Usage(); u != (fleet.Usage{}) {
		t.Fatalf("chips still allocated after both jobs: %+v", u)
	}
}

package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/checkpoint"
)

// TestGoodputAcrossControllerRestart SIGKILLs the controller process of a
// pipeline after it committed a checkpoint, in the middle of a later epoch,
// and restarts it. The restarted controller resumes from the checkpoint, and
// its goodput report at exit must cover the job's whole history, not only
// its own run: every checkpoint the job committed, in either incarnation;
// the productive chip-time committed before the kill; the crash as a
// failure, with the downtime after it; and totals that add up.
func TestGoodputAcrossControllerRestart(t *testing.T) {
	e := newEnv(t, 6, 2000, sigd.Options{})
	e.memoize(t, "warm")
	pipeline := "gp-restart"
	// Slower steps (about 1s epochs), so the kill lands inside an epoch.
	pp := startPipeline(t, e, pipeline, 2, 2, "--time-scale", "3e6")
	midEpoch(t, pp)
	time.Sleep(time.Second) // let the goodput journal see the epoch's steps
	pp.controller.kill()
	before, _ := committedSeq(t, e, pipeline)

	// What the job had committed when its controller died, as the
	// checkpoint's goodput history says.
	cs, err := checkpoint.NewStore(e.w.Store, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cs.Latest(context.Background())
	if err != nil || m == nil {
		t.Fatalf("no checkpoint before the kill: %v", err)
	}
	b, err := cs.LoadGoodput(context.Background(), m)
	if err != nil || b == nil {
		t.Fatalf("checkpoint %d has no goodput history: %v", m.Seq, err)
	}
	var h goodput.History
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	const chips = 4 // --chips 4: the fleet of the controller's recorder
	hrep, err := goodput.Compute(goodput.Timeline{Capacity: goodput.Capacity{Chips: chips, Start: h.Start, End: h.End}, Jobs: []goodput.JobTimeline{h.Timeline}})
	if err != nil {
		t.Fatal(err)
	}
	committedBefore := hrep.Jobs[0].Total.ChipSeconds[goodput.Productive]
	if hrep.Jobs[0].Checkpoints != m.Epochs || committedBefore <= 0 {
		t.Fatalf("checkpoint %d's history: %d checkpoints, %.3f productive chip-s", m.Seq, hrep.Jobs[0].Checkpoints, committedBefore)
	}

	time.Sleep(300 * time.Millisecond) // the controller is down for a while
	pp.controller.start()
	pp.waitExit(t, 60*time.Second)
	rep := pp.report(t)
	if rep.Exit != "done" {
		t.Fatalf("after the restart: exit %q", rep.Exit)
	}
	final := checkExactlyOnce(t, e, pipeline)
	if len(rep.Goodput.Jobs) != 1 {
		t.Fatalf("goodput report has %d jobs", len(rep.Goodput.Jobs))
	}
	j := rep.Goodput.Jobs[0]
	s := j.Total
	cat := s.ChipSeconds
	t.Logf("checkpoint %d at the kill (%.2f productive chip-s committed); final checkpoint %d; after the restart: %d checkpoints, %d failures; "+
		"SG %.3f RG %.3f PG %.3f; productive %.2f lost_work %.2f idle %.2f of %.2f all-allocated chip-s",
		before, committedBefore, final.Epochs, j.Checkpoints, j.Failures, s.SG, s.RG, s.PG, cat[goodput.Productive], cat[goodput.LostWork],
		cat[goodput.Idle], s.AllAllocatedChipSeconds)

	// Both incarnations' checkpoints, each once: the report is not the
	// restarted controller's alone.
	if j.Checkpoints != final.Epochs {
		t.Errorf("goodput counts %d checkpoints, the job committed %d (%d of them before the kill)", j.Checkpoints, final.Epochs, m.Epochs)
	}
	// The crash is a failure; what it cost (steps after the last
	// checkpoint, chips reserved while the controller was down) is lost
	// work and idle time.
	if j.Failures < 1 {
		t.Errorf("goodput records %d failures; the controller was killed", j.Failures)
	}
	if cat[goodput.LostWork]+cat[goodput.Idle] <= 0 {
		t.Error("no lost work or downtime recorded for the kill")
	}
	// Productive time committed before the kill is still there, and the
	// window reaches back to the first incarnation's start.
	if cat[goodput.Productive] < committedBefore {
		t.Errorf("productive %.3f chip-s, less than the %.3f committed before the kill", cat[goodput.Productive], committedBefore)
	}
	if window := chips * h.End.Sub(h.Start).Seconds(); rep.Goodput.Fleet.CapacityChipSeconds < window {
		t.Errorf("capacity %.3f chip-s, less than the first incarnation's %.3f", rep.Goodput.Fleet.CapacityChipSeconds, window)
	}
	// Totals add up.
	for _, x := range []struct {
		name string
		v    float64
	}{{"SG", s.SG}, {"RG", s.RG}, {"PG", s.PG}, {"MPG", s.MPG}} {
		if x.v <= 0 || x.v > 1 {
			t.Errorf("%s = %v, want in (0, 1]", x.name, x.v)
		}
	}
	sum := 0.0
	for c := goodput.Productive; c <= goodput.Uncommitted; c++ {
		sum += cat[c]
	}
	const eps = 1e-6
	if diff := sum - s.AllAllocatedChipSeconds; diff > eps || diff < -eps {
		t.Errorf("categories sum to %.6f, all-allocated %.6f", sum, s.AllAllocatedChipSeconds)
	}
	if cat[goodput.Productive] > s.AllAllocatedChipSeconds+eps || s.AllAllocatedChipSeconds > s.HeldChipSeconds+eps ||
		s.HeldChipSeconds > s.DemandChipSeconds+eps || s.IdealChipSeconds > cat[goodput.Productive]+eps {
		t.Errorf("want ideal <= productive <= all-allocated <= held <= demand: %+v", s)
	}
	if cat[goodput.Uncommitted] != 0 {
		t.Errorf("%.3f chip-s uncommitted after the job finished", cat[goodput.Uncommitted])
	}
}

// TestGoodputRestartFromCheckpointHistory: without the journal, a restarted
// controller continues the goodput timeline from the last checkpoint's
// history alone. The first run is stopped in the middle of an epoch after a
// checkpoint; the second resumes and finishes, and its report holds both
// runs' checkpoints, the first run's committed productive time, and the stop
// as a failure (with the journal disabled nothing says it was clean).
func TestGoodputRestartFromCheckpointHistory(t *testing.T) {
	e := newEnv(t, 6, 1500, sigd.Options{})
	cfg := e.jobConfig(t, "gp-checkpoint")
	cfg.GoodputJournalInterval = -1
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctx1, stop := context.WithCancel(ctx)
	first := cfg
	first.OnController = func(c *Controller, _ string) {
		go func() {
			for ctx1.Err() == nil {
				if st := c.Status(); st.GetCommittedEpochs() >= 1 && st.GetStatus() == "training" && st.GetSteps() > 0 {
					stop()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	rep1, err := RunJob(ctx1, first)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if rep1.Exit == "done" || len(rep1.Goodput.Jobs) != 1 {
		t.Fatalf("the first run was not stopped mid-job: exit %q", rep1.Exit)
	}
	before := rep1.Goodput.Jobs[0]

	rep2, err := RunJob(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Exit != "done" {
		t.Fatalf("second run: exit %q", rep2.Exit)
	}
	final := checkExactlyOnce(t, e, "gp-checkpoint")
	j := rep2.Goodput.Jobs[0]
	cat := j.Total.ChipSeconds
	t.Logf("first run: %d checkpoints, %.2f productive chip-s; both: %d checkpoints of %d, %d failures, productive %.2f lost_work %.2f idle %.2f",
		before.Checkpoints, before.Total.ChipSeconds[goodput.Productive], j.Checkpoints, final.Epochs, j.Failures,
		cat[goodput.Productive], cat[goodput.LostWork], cat[goodput.Idle])
	if j.Checkpoints != final.Epochs {
		t.Errorf("goodput counts %d checkpoints, the job committed %d", j.Checkpoints, final.Epochs)
	}
	if j.Failures < 1 {
		t.Errorf("%d failures: the stop without a journal is not recorded", j.Failures)
	}
	if p := before.Total.ChipSeconds[goodput.Productive]; cat[goodput.Productive] < p || p <= 0 {
		t.Errorf("productive %.3f chip-s, the first run had committed %.3f", cat[goodput.Productive], p)
	}
	if s := j.Total; s.RG <= 0 || s.RG > 1 || s.SG > 1 || s.PG > 1 || cat[goodput.Productive] > s.AllAllocatedChipSeconds {
		t.Errorf("totals do not add up: %+v", s)
	}
}

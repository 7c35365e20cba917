package goodput

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// at is t seconds after epoch, the origin the text form parses to.
func at(sec float64) time.Time { return epoch.Add(time.Duration(sec * float64(time.Second))) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testdataReport computes the hand-checked report of a testdata case.
func testdataReport(t *testing.T, name string) Report {
	t.Helper()
	rep, err := parseAndCompute(testdataTimeline(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// steps records one-second steps over [from, to) at the given fraction of peak.
func steps(t *testing.T, j *JobRecorder, from, to int, peak float64) {
	t.Helper()
	for s := from; s < to; s++ {
		must(t, j.Step(at(float64(s)), at(float64(s+1)), time.Duration(peak*float64(time.Second))))
	}
}

// saveCheckpoint records a checkpoint saved over [from, to) and committed at
// to.
func saveCheckpoint(t *testing.T, j *JobRecorder, from, to float64) {
	t.Helper()
	must(t, j.Begin(at(from), CheckpointSave))
	must(t, j.End(at(to)))
	must(t, j.CheckpointCommitted(at(to)))
}

// trainToCheckpoint records the start that testdata/lost_work.txt and
// restart.txt share: 4 of 4 chips from 0, initialization 0..10, steps
// 10..40 at peak, a checkpoint saved 40..45 and committed at 45.
func trainToCheckpoint(t *testing.T, j *JobRecorder) {
	t.Helper()
	must(t, j.Allocate(at(0), 4, 4))
	must(t, j.Begin(at(0), Initialization))
	must(t, j.End(at(10)))
	steps(t, j, 10, 40, 1)
	saveCheckpoint(t, j, 40, 45)
}

// TestRecorderLostWork drives the Recorder the way the trainer will through
// the scenario of testdata/lost_work.txt, one step at a time, and expects the
// very report that was checked by hand there.
func TestRecorderLostWork(t *testing.T) {
	rec := NewRecorder(4, at(0))
	a := rec.Job("a")
	trainToCheckpoint(t, a)
	steps(t, a, 45, 70, 1)
	must(t, a.Failure(at(70)))
	must(t, a.Begin(at(70), CheckpointRestore))
	must(t, a.End(at(75)))
	steps(t, a, 75, 95, 1)
	saveCheckpoint(t, a, 95, 100)

	tl := rec.Timeline(at(100))
	productive := 0
	for _, iv := range tl.Jobs[0].Intervals {
		if iv.Category == Productive {
			productive++
		}
	}
	// 75 steps, merged into one interval per uninterrupted stretch.
	if productive != 3 {
		t.Errorf("%d productive intervals, want 3 (back-to-back steps merged)", productive)
	}
	got, err := Compute(tl)
	must(t, err)
	if want := testdataReport(t, "lost_work.txt"); !reflect.DeepEqual(got, want) {
		t.Errorf("recorder report\n%+v\nwant (testdata/lost_work.txt)\n%+v", got, want)
	}
}

// TestRecorderHold is testdata/hold.txt through the Recorder: a failure ends
// the step stretch, a hold is placed, the chips are released while the hold
// stays (Ads paper VI.A), and the job comes back.
func TestRecorderHold(t *testing.T) {
	rec := NewRecorder(4, at(0))
	a := rec.Job("a")
	must(t, a.Allocate(at(0), 4, 4))
	must(t, a.Begin(at(0), Initialization))
	must(t, a.End(at(5)))
	must(t, a.Begin(at(5), Compile))
	must(t, a.End(at(10)))
	steps(t, a, 10, 30, 1)
	must(t, a.CheckpointCommitted(at(30)))
	steps(t, a, 30, 40, 1)
	must(t, a.Failure(at(40)))
	must(t, a.Begin(at(40), Hold))
	must(t, a.Allocate(at(50), 0, 0))
	must(t, a.End(at(70)))
	must(t, a.Allocate(at(70), 4, 4))
	must(t, a.Begin(at(70), CheckpointRestore))
	must(t, a.End(at(75)))
	steps(t, a, 75, 95, 1)
	saveCheckpoint(t, a, 95, 100)

	got, err := rec.Report(at(100))
	must(t, err)
	if want := testdataReport(t, "hold.txt"); !reflect.DeepEqual(got, want) {
		t.Errorf("recorder report\n%+v\nwant (testdata/hold.txt)\n%+v", got, want)
	}
}

// TestRecorderSnapshot checks that Timeline(end) cuts the run at end without
// changing the recorder: open intervals close at end, a step straddling end
// keeps its ideal time pro rata, and recording continues afterwards.
func TestRecorderSnapshot(t *testing.T) {
	rec := NewRecorder(2, at(0))
	a := rec.Job("a")
	must(t, a.Allocate(at(0), 2, 2))
	must(t, a.Begin(at(0), Compile))
	must(t, a.End(at(4)))
	must(t, a.Step(at(4), at(8), 2*time.Second)) // 50% of peak

	rep, err := rec.Report(at(6))
	must(t, err)
	f := rep.Fleet
	// Compile 0..4 = 8 chip-s, step 4..6 = 4 chip-s uncommitted, ideal 0
	// (nothing committed). Capacity 2 × 6 = 12.
	if f.CapacityChipSeconds != 12 || f.ChipSeconds[Compile] != 8 || f.ChipSeconds[Uncommitted] != 4 || f.RG != 0 {
		t.Errorf("snapshot at 6s: %+v", f)
	}
	tl := rec.Timeline(at(6))
	if iv := tl.Jobs[0].Intervals[1]; iv.End != at(6) || iv.Ideal != time.Second {
		t.Errorf("straddling step cut to %v ideal %v, want end 6s ideal 1s", iv.End.Sub(epoch), iv.Ideal)
	}

	must(t, a.CheckpointCommitted(at(8)))
	must(t, a.Begin(at(8), Idle))
	rep, err = rec.Report(at(10)) // Idle still open: closes at 10
	must(t, err)
	f = rep.Fleet
	// Productive 4..8 = 8 chip-s with ideal 4; idle 8..10 = 4; total 20.
	if f.ChipSeconds[Productive] != 8 || f.IdealChipSeconds != 4 || f.ChipSeconds[Idle] != 4 || f.ChipSeconds[Uncommitted] != 0 || f.PG != 0.5 {
		t.Errorf("report at 10s: %+v", f)
	}
	if rep, err := rec.Report(at(-1)); err != nil || rep.Fleet.CapacityChipSeconds != 0 {
		t.Errorf("report before the start: %v, capacity %v", err, rep.Fleet.CapacityChipSeconds)
	}
}

// TestRecorderErrors checks that calls in the wrong state fail with the
// sentinel the caller can branch on, and record nothing.
func TestRecorderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(a *JobRecorder) error
		want error
	}{
		{"time goes back", func(a *JobRecorder) error { return a.Begin(at(5), Compile) }, ErrOutOfOrder},
		{"before start", func(a *JobRecorder) error { return a.CheckpointCommitted(at(-1)) }, ErrOutOfOrder},
		{"begin while open", func(a *JobRecorder) error { return a.Begin(at(20), Compile) }, ErrIntervalOpen},
		{"step while open", func(a *JobRecorder) error { return a.Step(at(20), at(21), 0) }, ErrIntervalOpen},
		{"begin productive", func(a *JobRecorder) error { return a.Begin(at(20), Productive) }, ErrInvalidTimeline},
		{"begin derived", func(a *JobRecorder) error { return a.Begin(at(20), LostWork) }, ErrInvalidTimeline},
		{"held > requested", func(a *JobRecorder) error { return a.Allocate(at(20), 3, 2) }, ErrInvalidTimeline},
		{"over capacity", func(a *JobRecorder) error { return a.Allocate(at(20), 4, 4) }, ErrInvalidTimeline},
		{"empty phase", func(a *JobRecorder) error { return a.SetPhase(at(20), "") }, ErrInvalidTimeline},
		{"reserved phase", func(a *JobRecorder) error { return a.SetPhase(at(20), "*") }, ErrInvalidTimeline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := NewRecorder(4, at(0))
			b := rec.Job("b")
			must(t, b.Allocate(at(0), 1, 1)) // leaves 3 chips for a
			a := rec.Job("a")
			must(t, a.Allocate(at(0), 2, 2))
			must(t, a.Begin(at(10), InputStall))
			before := rec.Timeline(at(30))
			err := tc.call(a)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if after := rec.Timeline(at(30)); !reflect.DeepEqual(before, after) {
				t.Errorf("failed call changed the timeline:\n%+v\n%+v", before, after)
			}
		})
	}

	rec := NewRecorder(4, at(0))
	a := rec.Job("a")
	if err := a.End(at(1)); !errors.Is(err, ErrNoInterval) {
		t.Errorf("End with nothing open: %v, want ErrNoInterval", err)
	}
	if err := a.Step(at(1), at(2), 0); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("Step with no chips: %v, want ErrNotAllocated", err)
	}
	must(t, a.Allocate(at(1), 2, 4))
	if err := a.Step(at(1), at(2), 0); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("Step on a partial allocation: %v, want ErrNotAllocated", err)
	}
	must(t, a.Allocate(at(2), 4, 4))
	must(t, a.Step(at(2), at(5), time.Second))
	if err := a.Failure(at(4)); !errors.Is(err, ErrOutOfOrder) {
		t.Errorf("event inside a recorded step: %v, want ErrOutOfOrder", err)
	}
	if err := a.Step(at(5), at(6), 2*time.Second); !errors.Is(err, ErrInvalidTimeline) {
		t.Errorf("ideal above device time: %v, want ErrInvalidTimeline", err)
	}
}

// TestRecorderFailureClosesInterval: a crash ends whatever the job was doing.
func TestRecorderFailureClosesInterval(t *testing.T) {
	rec := NewRecorder(1, at(0))
	a := rec.Job("a")
	must(t, a.Allocate(at(0), 1, 1))
	must(t, a.Begin(at(0), Initialization))
	must(t, a.Failure(at(3)))
	must(t, a.Begin(at(3), Initialization)) // would be ErrIntervalOpen otherwise
	must(t, a.Preemption(at(5)))
	must(t, a.Allocate(at(5), 0, 1))
	rep, err := rec.Report(at(10))
	must(t, err)
	j := rep.Jobs[0]
	if j.Total.ChipSeconds[Initialization] != 5 || j.Total.ChipSeconds[UnmetDemand] != 5 || j.Failures != 1 || j.Preemptions != 1 {
		t.Errorf("got %+v", j)
	}
}

// TestRecorderConcurrent records several jobs from their own goroutines (run
// with -race) and checks that nothing is lost.
func TestRecorderConcurrent(t *testing.T) {
	const jobs, n = 8, 200
	rec := NewRecorder(jobs, at(0))
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			j := rec.Job(string(rune('a' + i)))
			if err := j.Allocate(at(0), 1, 1); err != nil {
				t.Error(err)
			}
			for s := range n {
				if err := j.Step(at(float64(s)), at(float64(s+1)), time.Second); err != nil {
					t.Error(err)
				}
				if s%10 == 9 {
					if err := j.CheckpointCommitted(at(float64(s + 1))); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	rep, err := rec.Report(at(n))
	must(t, err)
	if f := rep.Fleet; f.MPG != 1 || f.ChipSeconds[Productive] != jobs*n {
		t.Errorf("fleet %v, productive %v chip-s, want MPG 1 and %d", f, f.ChipSeconds[Productive], jobs*n)
	}
}

// TestRecorderJobName: a name that reports and metrics cannot carry is
// refused at the first call, not when the report is computed at exit.
func TestRecorderJobName(t *testing.T) {
	rec := NewRecorder(1, at(0))
	for _, name := range []string{"", "*", "two words"} {
		if err := rec.Job(name).Allocate(at(0), 1, 1); !errors.Is(err, ErrInvalidTimeline) {
			t.Errorf("job %q: got %v, want ErrInvalidTimeline", name, err)
		}
	}
	if _, err := rec.Report(at(1)); err != nil {
		t.Errorf("refused jobs left the recorder invalid: %v", err)
	}
}

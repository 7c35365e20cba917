package goodput

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// jsonRoundTrip is what a checkpoint does to a History.
func jsonRoundTrip(t *testing.T, h History) History {
	t.Helper()
	b, err := json.Marshal(h)
	must(t, err)
	var out History
	must(t, json.Unmarshal(b, &out))
	return out
}

// TestRecorderRestart is testdata/restart.txt through two recorders, one per
// controller incarnation: the first records until it is last known alive and
// hands over its History as JSON; the second, started later, restores it,
// records the crash and the downtime the way the trainer does, and goes on.
// Its report must be the one checked by hand in the testdata file.
func TestRecorderRestart(t *testing.T) {
	first := NewRecorder(4, at(0))
	a := first.Job("a")
	trainToCheckpoint(t, a)
	steps(t, a, 45, 60, 1)
	h, err := first.History("a", at(60))
	must(t, err)
	if h.Held != 4 || h.Requested != 4 || !h.Uncommitted() {
		t.Fatalf("history at 60: allocation %d/%d, uncommitted %v; want 4/4, true", h.Held, h.Requested, h.Uncommitted())
	}
	h = jsonRoundTrip(t, h)

	second := NewRecorder(4, at(70))
	b := second.Job("a") // handed out before the restore, as the trainer does
	if _, err := second.Restore(h); err != nil {
		t.Fatal(err)
	}
	must(t, b.Failure(at(60)))        // the crash: after the last record
	must(t, b.Allocate(at(70), 0, 0)) // the new incarnation demands nothing yet
	must(t, b.Allocate(at(75), 0, 4))
	must(t, b.Allocate(at(80), 4, 4))
	must(t, b.Begin(at(80), CheckpointRestore))
	must(t, b.End(at(85)))
	steps(t, b, 85, 95, 1)
	saveCheckpoint(t, b, 95, 100)
	got, err := second.Report(at(100))
	must(t, err)
	if want := testdataReport(t, "restart.txt"); !reflect.DeepEqual(got, want) {
		t.Errorf("restored recorder report\n%+v\nwant (testdata/restart.txt)\n%+v", got, want)
	}
}

// TestHistoryRoundTrip: a restored history is the timeline it was taken
// from, with open records closed at its end and the allocation reopened.
func TestHistoryRoundTrip(t *testing.T) {
	rec := NewRecorder(8, at(0))
	a := rec.Job("a")
	must(t, a.Allocate(at(1), 2, 4))
	must(t, a.Allocate(at(2), 4, 4))
	must(t, a.Begin(at(2), Compile))
	must(t, a.End(at(3)))
	steps(t, a, 3, 6, 0.5)
	must(t, a.CheckpointCommitted(at(6)))
	must(t, a.SetPhase(at(6), "caught-up"))
	must(t, a.Begin(at(6), InputStall)) // open at the history's end
	h, err := rec.History("a", at(7))
	must(t, err)
	if h.Uncommitted() {
		t.Error("every step is committed, Uncommitted says otherwise")
	}
	b, err := json.Marshal(h)
	must(t, err)
	for _, want := range []string{`"category":"input_stall"`, `"kind":"checkpoint"`, `"phase":"caught-up"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("history JSON has no %s:\n%s", want, b)
		}
	}
	h = jsonRoundTrip(t, h)

	again := NewRecorder(8, at(10))
	if _, err := again.Restore(h); err != nil {
		t.Fatal(err)
	}
	if got, want := again.Timeline(at(7)), rec.Timeline(at(7)); !reflect.DeepEqual(got, want) {
		t.Errorf("restored timeline\n%+v\nwant\n%+v", got, want)
	}
	// The allocation at the end stays open; the phase carries on.
	j := again.Job("a")
	must(t, j.Step(at(11), at(12), time.Second))
	tl := again.Timeline(at(12))
	if n := len(tl.Jobs[0].Allocations); n != 3 || !tl.Jobs[0].Allocations[2].End.Equal(at(12)) {
		t.Errorf("allocations %+v: want the one open at 7 to continue to 12", tl.Jobs[0].Allocations)
	}
	rep, err := Compute(tl)
	must(t, err)
	if len(rep.Jobs[0].Phases) != 2 || rep.Jobs[0].Phases[1].Phase != "caught-up" || rep.Jobs[0].Phases[1].ChipSeconds[Uncommitted] != 4 {
		t.Errorf("phases %+v: want the step at 11 uncommitted in caught-up", rep.Jobs[0].Phases)
	}
}

func TestRestoreErrors(t *testing.T) {
	base := func() History {
		rec := NewRecorder(4, at(0))
		a := rec.Job("a")
		must(t, a.Allocate(at(0), 4, 4))
		steps(t, a, 0, 5, 1)
		h, err := rec.History("a", at(5))
		must(t, err)
		return h
	}
	cases := []struct {
		name   string
		change func(h *History)
		setup  func(r *Recorder)
		want   error
	}{
		{"ends before it starts", func(h *History) { h.Start = at(6) }, nil, ErrInvalidTimeline},
		{"record after the end", func(h *History) { h.End = at(4) }, nil, ErrInvalidTimeline},
		{"overlapping intervals", func(h *History) {
			h.Timeline.Intervals = append(h.Timeline.Intervals, Interval{Start: at(1), End: at(2), Category: Idle})
		}, nil, ErrInvalidTimeline},
		{"held above requested", func(h *History) { h.Held, h.Requested = 4, 2 }, nil, ErrInvalidTimeline},
		{"more than the fleet", func(h *History) { h.Held, h.Requested = 8, 8 }, nil, ErrInvalidTimeline},
		{"bad job name", func(h *History) { h.Timeline.Job = "*" }, nil, ErrInvalidTimeline},
		{"job already recorded", nil, func(r *Recorder) { must(t, r.Job("a").Allocate(at(10), 0, 1)) }, ErrRecorded},
		{"overcommits the fleet", nil, func(r *Recorder) { must(t, r.Job("b").Allocate(at(10), 1, 1)) }, ErrInvalidTimeline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			if tc.change != nil {
				tc.change(&h)
			}
			r := NewRecorder(4, at(10))
			if tc.setup != nil {
				tc.setup(r)
			}
			before := r.Timeline(at(20))
			if _, err := r.Restore(h); !errors.Is(err, tc.want) {
				t.Fatalf("Restore: %v, want %v", err, tc.want)
			}
			if after := r.Timeline(at(20)); !reflect.DeepEqual(after, before) {
				t.Errorf("a failed Restore changed the recorder:\n%+v\nwas\n%+v", after, before)
			}
		})
	}
	t.Run("history before the last record", func(t *testing.T) {
		r := NewRecorder(4, at(0))
		must(t, r.Job("a").Allocate(at(5), 1, 1))
		if _, err := r.History("a", at(4)); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("History: %v, want ErrOutOfOrder", err)
		}
	})
}

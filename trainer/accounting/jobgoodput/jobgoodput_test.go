package jobgoodput

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// firstRun records a job on 4 chips: a step committed by the checkpoint at
// 2s, then a step at [3s, 4s) that no checkpoint follows; the process is
// last known alive at 5s.
func firstRun(t *testing.T) *Account {
	t.Helper()
	a := New(goodput.NewRecorder(4, t0), "j")
	for _, err := range []error{
		a.Allocate(t0, 4, 4),
		a.Follow(t0, goodput.Initialization, true),
		a.Follow(at(1), 0, false),
		a.Step(at(1), at(2), time.Second/2),
		a.Event(at(2), goodput.Checkpoint),
		a.Follow(at(2), goodput.InputStall, true),
		a.Follow(at(3), 0, false),
		a.Step(at(3), at(4), time.Second/2),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func chipSeconds(t *testing.T, a *Account, end time.Time) goodput.Breakdown {
	t.Helper()
	r, err := a.Report(end)
	if err != nil {
		t.Fatal(err)
	}
	j, ok := a.Summary(r)
	if !ok {
		t.Fatal("the job is not in its recorder's report")
	}
	return j.Total.ChipSeconds
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestResume: a restarted controller continues the job's timeline. After a
// crash (a journal that is not final) the uncommitted step is lost work
// and the downtime until the new process started is idle on the chips the
// job held; after a clean exit there is no failure, unless it left
// uncommitted steps (a preemption). A history of another job is refused,
// and nothing is recorded.
func TestResume(t *testing.T) {
	body, err := firstRun(t).Journal(at(5), 1, "inc1", false)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := Choose("j", 1, nil, body)
	if err != nil || rh == nil || rh.Source != "journal" || rh.Final {
		t.Fatalf("choose the journal: %+v %v", rh, err)
	}
	b := New(goodput.NewRecorder(4, at(10)), "j")
	if ev, err := b.Resume(*rh, at(10)); ev != "failure" || err != nil {
		t.Fatalf("resume after a crash: %q %v", ev, err)
	}
	cs := chipSeconds(t, b, at(10))
	// Productive [1,2); lost [3,4); initialization [0,1), stall [2,3);
	// idle [4,5) and the downtime [5,10): 4 chips each.
	for _, c := range []struct {
		cat  goodput.Category
		want float64
	}{{goodput.Productive, 4}, {goodput.LostWork, 4}, {goodput.Initialization, 4}, {goodput.InputStall, 4}, {goodput.Idle, 24}} {
		if !near(cs[c.cat], c.want) {
			t.Errorf("after a crash: %s %.3f chip-s, want %.0f (%v)", c.cat, cs[c.cat], c.want, cs)
		}
	}

	for _, tc := range []struct {
		name      string
		committed bool // the second step was checkpointed before the exit
		want      string
	}{{"clean exit, all committed", true, "none"}, {"clean exit, a step uncommitted", false, "preemption"}} {
		a := firstRun(t)
		if tc.committed {
			if err := a.Event(at(4), goodput.Checkpoint); err != nil {
				t.Fatal(err)
			}
		}
		body, err := a.Journal(at(5), 2, "inc1", true)
		if err != nil {
			t.Fatal(err)
		}
		rh, err := Choose("j", 2, nil, body)
		if err != nil || rh == nil || !rh.Final {
			t.Fatalf("%s: choose %+v %v", tc.name, rh, err)
		}
		b := New(goodput.NewRecorder(4, at(10)), "j")
		if ev, err := b.Resume(*rh, at(10)); ev != tc.want || err != nil {
			t.Errorf("%s: resumed as %q (%v), want %q", tc.name, ev, err, tc.want)
		}
		if lost := chipSeconds(t, b, at(10))[goodput.LostWork]; near(lost, 0) != tc.committed {
			t.Errorf("%s: %.3f chip-s lost", tc.name, lost)
		}
	}

	other := New(goodput.NewRecorder(4, at(10)), "k")
	if ev, err := other.Resume(*rh, at(10)); ev != "" || err == nil || !strings.Contains(err.Error(), "another job") {
		t.Fatalf("history of job j resumed by job k: %q %v", ev, err)
	}
	r, err := other.Report(at(10))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.Jobs {
		for c, v := range j.Total.ChipSeconds {
			if v != 0 {
				t.Errorf("a refused history recorded %.3f chip-s of %s for job %s", v, goodput.Category(c), j.Job)
			}
		}
	}
}

// TestChoose: the journal is restored only if it follows the checkpoint
// being restored, is the job's, and reaches at least as far as the
// checkpoint's history; otherwise the checkpoint's history is. What does
// not parse is reported and left out.
func TestChoose(t *testing.T) {
	a := firstRun(t)
	ck, err := a.CheckpointHistory(at(4))
	if err != nil {
		t.Fatal(err)
	}
	var h goodput.History
	if err := json.Unmarshal(ck, &h); err != nil || !h.End.Equal(at(4)) {
		t.Fatalf("checkpoint history: %v %v", h.End, err)
	}
	if evs := h.Timeline.Events; len(evs) == 0 || evs[len(evs)-1].Kind != goodput.Checkpoint || !evs[len(evs)-1].At.Equal(at(4)) {
		t.Fatalf("the checkpoint's history does not end with its own commit: %+v", evs)
	}
	journal := func(seq int, end float64) []byte {
		b, err := a.Journal(at(end), seq, "inc", false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name        string
		job         string
		seq         int
		ck, journal []byte
		want        string // "" for nil
		wantErr     bool
	}{
		{"journal after the checkpoint", "j", 3, ck, journal(3, 5), "journal", false},
		{"journal of an older checkpoint", "j", 3, ck, journal(2, 5), "checkpoint", false},
		{"journal of another job", "k", 3, ck, journal(3, 5), "checkpoint", false},
		{"no checkpoint, a journal", "j", -1, nil, journal(-1, 5), "journal", false},
		{"journal that does not parse", "j", 3, ck, []byte("{"), "checkpoint", true},
		{"checkpoint history that does not parse", "j", 3, []byte("x"), nil, "", true},
		{"neither", "j", -1, nil, nil, "", false},
	} {
		rh, err := Choose(tc.job, tc.seq, tc.ck, tc.journal)
		got := ""
		if rh != nil {
			got = rh.Source
		}
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: restored %q (err %v), want %q (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	// A journal that ends before the checkpoint's history: the checkpoint
	// reaches further.
	early := journal(3, 4)
	var j Journal
	if err := json.Unmarshal(early, &j); err != nil {
		t.Fatal(err)
	}
	j.History.End = at(3.5)
	early, _ = json.Marshal(j)
	if rh, err := Choose("j", 3, ck, early); err != nil || rh == nil || rh.Source != "checkpoint" {
		t.Errorf("a journal ending before the checkpoint's history was restored: %+v %v", rh, err)
	}
}

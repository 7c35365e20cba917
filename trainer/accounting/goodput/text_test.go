package goodput

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestJSONFieldNames pins the JSON report's field names, which dashboards and
// scripts read, and checks that it decodes back to the same report.
func TestJSONFieldNames(t *testing.T) {
	rep := testdataReport(t, "two_phases.txt")
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	must(t, json.Unmarshal(buf.Bytes(), &top))
	keys := func(raw json.RawMessage) []string {
		// Decode token by token to see the order the writer used.
		dec := json.NewDecoder(bytes.NewReader(raw))
		var out []string
		depth := 0
		for {
			tok, err := dec.Token()
			if err != nil {
				return out
			}
			switch v := tok.(type) {
			case json.Delim:
				if v == '{' || v == '[' {
					depth++
				} else {
					depth--
				}
			case string:
				if depth == 1 && dec.More() {
					out = append(out, v)
					// Skip the value.
					var skip json.RawMessage
					must(t, dec.Decode(&skip))
				}
			}
		}
	}
	if got, want := keys(buf.Bytes()), []string{"fleet", "phases", "jobs"}; !reflect.DeepEqual(got, want) {
		t.Errorf("top-level keys %v, want %v", got, want)
	}
	wantSummary := []string{"scheduling_goodput", "runtime_goodput", "program_goodput", "mpg", "capacity_chip_seconds",
		"demand_chip_seconds", "held_chip_seconds", "all_allocated_chip_seconds", "ideal_chip_seconds", "chip_seconds"}
	if got := keys(top["fleet"]); !reflect.DeepEqual(got, wantSummary) {
		t.Errorf("fleet keys %v, want %v", got, wantSummary)
	}
	var fleet map[string]json.RawMessage
	must(t, json.Unmarshal(top["fleet"], &fleet))
	wantCats := []string{"productive", "initialization", "compile", "input_stall", "checkpoint_save", "checkpoint_restore",
		"hold", "idle", "lost_work", "uncommitted", "partial_allocation", "unmet_demand", "unallocated"}
	if got := keys(fleet["chip_seconds"]); !reflect.DeepEqual(got, wantCats) {
		t.Errorf("chip_seconds keys %v, want %v", got, wantCats)
	}
	var jobs []map[string]json.RawMessage
	must(t, json.Unmarshal(top["jobs"], &jobs))
	for _, k := range []string{"job", "checkpoints", "failures", "preemptions", "total", "phases"} {
		if _, ok := jobs[0][k]; !ok {
			t.Errorf("job has no %q field", k)
		}
	}
	var back Report
	must(t, json.Unmarshal(buf.Bytes(), &back))
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("JSON round trip changed the report\n%+v\n%+v", back, rep)
	}
	var b Breakdown
	if err := json.Unmarshal([]byte(`{"bogus": 1}`), &b); err == nil {
		t.Error("unknown category decoded without error")
	}
}

// TestFormatRoundTrip writes each hand-checked timeline in the text form and
// reads it back unchanged (up to record order, which Compute ignores).
func TestFormatRoundTrip(t *testing.T) {
	for _, name := range []string{"lost_work.txt", "two_phases.txt", "fleet_queued.txt", "split.txt"} {
		tl, err := ParseTimeline(strings.NewReader(testdataTimeline(t, name)))
		must(t, err)
		var buf bytes.Buffer
		must(t, FormatTimeline(&buf, tl))
		back, err := ParseTimeline(bytes.NewReader(buf.Bytes()))
		must(t, err)
		norm := func(tl Timeline) Timeline {
			for i := range tl.Jobs {
				j := &tl.Jobs[i]
				j.Allocations, j.Intervals = sortedAllocations(j.Allocations), sortedIntervals(j.Intervals)
				j.PhaseChanges, j.Events = sortedPhaseChanges(j.PhaseChanges), sortedEvents(j.Events)
			}
			return tl
		}
		if !reflect.DeepEqual(norm(back), norm(tl)) {
			t.Errorf("%s changed through FormatTimeline:\n%s", name, buf.String())
		}
	}
	// Times are written relative to the window's start.
	tl := Timeline{Capacity: Capacity{Chips: 1, Start: at(100), End: at(110)},
		Jobs: []JobTimeline{{Job: "a", Events: []Event{{At: at(105), Kind: Failure}}}}}
	var buf bytes.Buffer
	must(t, FormatTimeline(&buf, tl))
	if want := "capacity 1 0s..10s\njob a failure 5s\n"; buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
	tl.Jobs[0].Job = "has space"
	if err := FormatTimeline(&buf, tl); !errors.Is(err, ErrInvalidTimeline) {
		t.Errorf("unwritable name: %v", err)
	}
}

// TestParseErrors: malformed lines are rejected with their line number.
func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"", // no capacity
		"capacity 4 0s..10s\ncapacity 4 0s..10s",
		"capacity four 0s..10s",
		"capacity 4 0s-10s",
		"capacity 4 0s..10x",
		"capacity 4 0s..10s\njob a",
		"capacity 4 0s..10s\njob a alloc 4 0s..10s",
		"capacity 4 0s..10s\njob a productive 0s..10s",
		"capacity 4 0s..10s\njob a productive 0s..10s 5s",
		"capacity 4 0s..10s\njob a lost_work 0s..10s",
		"capacity 4 0s..10s\njob a sleep 0s..10s",
		"capacity 4 0s..10s\njob a checkpoint",
		"capacity 4 0s..10s\njob a phase caught-up",
		"capacity 4 0s..10s\njobs a checkpoint 1s",
	} {
		if _, err := ParseTimeline(strings.NewReader(in)); !errors.Is(err, ErrInvalidTimeline) {
			t.Errorf("%q: got %v, want ErrInvalidTimeline", in, err)
		} else if in != "" && !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: %v has no line number", in, err)
		}
	}
}

// TestValidate covers the rejections the testdata/invalid_* cases do not.
func TestValidate(t *testing.T) {
	base := func() Timeline {
		return Timeline{Capacity: Capacity{Chips: 4, Start: at(0), End: at(10)}, Jobs: []JobTimeline{{
			Job:          "a",
			Allocations:  []Allocation{{Start: at(0), End: at(10), Held: 4, Requested: 4}},
			Intervals:    []Interval{{Start: at(0), End: at(10), Category: Productive, Ideal: time.Second}},
			Events:       []Event{{At: at(10), Kind: Checkpoint}},
			PhaseChanges: []PhaseChange{{At: at(5), Phase: "caught-up"}},
		}}}
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("base timeline: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(t *Timeline)
	}{
		{"negative capacity", func(t *Timeline) { t.Capacity.Chips = -1 }},
		{"window backwards", func(t *Timeline) { t.Capacity.End = at(-1) }},
		{"overflow", func(t *Timeline) { t.Capacity.Chips = 1 << 40; t.Capacity.End = at(1e7) }},
		{"empty job name", func(t *Timeline) { t.Jobs[0].Job = "" }},
		{"reserved job name", func(t *Timeline) { t.Jobs[0].Job = "*" }},
		{"duplicate job", func(t *Timeline) { t.Jobs = append(t.Jobs, JobTimeline{Job: "a"}) }},
		{"request above capacity", func(t *Timeline) { t.Jobs[0].Allocations[0].Held, t.Jobs[0].Allocations[0].Requested = 0, 5 }},
		{"held above request", func(t *Timeline) { t.Jobs[0].Allocations[0].Requested = 3 }},
		{"zero request", func(t *Timeline) { t.Jobs[0].Allocations[0].Held, t.Jobs[0].Allocations[0].Requested = 0, 0 }},
		{"allocation outside window", func(t *Timeline) { t.Jobs[0].Allocations[0].End = at(11) }},
		{"overlapping allocations", func(t *Timeline) {
			t.Jobs[0].Allocations = append(t.Jobs[0].Allocations, Allocation{Start: at(9), End: at(10), Held: 0, Requested: 1})
		}},
		{"derived category", func(t *Timeline) { t.Jobs[0].Intervals[0].Category = LostWork }},
		{"ideal on compile", func(t *Timeline) { t.Jobs[0].Intervals[0].Category = Compile }},
		{"negative ideal", func(t *Timeline) { t.Jobs[0].Intervals[0].Ideal = -1 }},
		{"interval outside window", func(t *Timeline) { t.Jobs[0].Intervals[0].Start = at(-1) }},
		{"event outside window", func(t *Timeline) { t.Jobs[0].Events[0].At = at(11) }},
		{"unknown event", func(t *Timeline) { t.Jobs[0].Events[0].Kind = 7 }},
		{"phase outside window", func(t *Timeline) { t.Jobs[0].PhaseChanges[0].At = at(11) }},
		{"empty phase", func(t *Timeline) { t.Jobs[0].PhaseChanges[0].Phase = "" }},
	} {
		tl := base()
		tc.mutate(&tl)
		if err := tl.Validate(); !errors.Is(err, ErrInvalidTimeline) {
			t.Errorf("%s: got %v, want ErrInvalidTimeline", tc.name, err)
		}
		if _, err := Compute(tl); !errors.Is(err, ErrInvalidTimeline) {
			t.Errorf("%s: Compute: got %v, want ErrInvalidTimeline", tc.name, err)
		}
	}
}

// TestCategoryNames: every category has a distinct name that parses back.
func TestCategoryNames(t *testing.T) {
	seen := map[string]bool{}
	for c := range NumCategories {
		n := Category(c).String()
		if seen[n] || strings.HasPrefix(n, "Category(") {
			t.Errorf("category %d: name %q", c, n)
		}
		seen[n] = true
		if back, ok := ParseCategory(n); !ok || back != Category(c) {
			t.Errorf("ParseCategory(%q) = %v, %v", n, back, ok)
		}
	}
	if _, ok := ParseCategory("bogus"); ok {
		t.Error("ParseCategory accepted bogus")
	}
}

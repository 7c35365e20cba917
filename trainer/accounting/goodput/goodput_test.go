package goodput

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestData runs every testdata/*.txt case. Each file is a
// github.com/cockroachdb/datadriven script of one case: "compute", a
// timeline in the text form (see ParseTimeline), then ---- and the text
// report (or "error: ..." for a timeline Compute must reject). go test
// -rewrite rewrites the reports only. The report is a regression check;
// correctness comes from "# expect" lines in the timeline (comments to
// ParseTimeline), derived by hand in the file's comments and never rewritten
// (-rewrite leaves a case's input as it is):
//
//	# expect <job|*> <phase|*> key=value ...
//
// keys: sg rg pg mpg capacity demand held all_allocated ideal and every
// category name (chip-seconds).
func TestData(t *testing.T) {
	files := 0
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		files++
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "compute" {
				td.Fatalf(t, "unknown command %q", td.Cmd)
			}
			var got bytes.Buffer
			rep, err := parseAndCompute(td.Input)
			if err != nil {
				fmt.Fprintf(&got, "error: %v\n", err)
			} else if err := WriteText(&got, rep); err != nil {
				t.Fatal(err)
			}
			expectations := 0
			for n, line := range strings.Split(td.Input, "\n") {
				rest, ok := strings.CutPrefix(line, "# expect ")
				if !ok {
					continue
				}
				expectations++
				where := fmt.Sprintf("%s, timeline line %d", td.Pos, n+1)
				if err != nil {
					t.Errorf("%s: expectation on a timeline Compute rejected", where)
					continue
				}
				checkExpectation(t, where, rep, rest)
			}
			if err == nil && expectations == 0 {
				t.Errorf("%s has no hand-derived # expect lines", path)
			}
			return got.String()
		})
	})
	if files == 0 {
		t.Fatal("no testdata/*.txt")
	}
}

// testdataTimeline is the timeline of a testdata case, its compute case's
// input.
func testdataTimeline(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var timeline string
	// Read from a string: reading never rewrites the case file.
	datadriven.RunTestFromStringAny(t, string(data), func(t testing.TB, td *datadriven.TestData) string {
		if td.Cmd != "compute" {
			td.Fatalf(t, "unknown command %q", td.Cmd)
		}
		timeline = td.Input
		return td.Expected
	})
	return timeline
}

func parseAndCompute(input string) (Report, error) {
	tl, err := ParseTimeline(strings.NewReader(input))
	if err != nil {
		return Report{}, err
	}
	return Compute(tl)
}

// scope finds the summary for a job ("*" for the fleet) and phase ("*" for all).
func scope(rep Report, job, phase string) (Summary, bool) {
	var total Summary
	var phases []Summary
	if job == allScope {
		total, phases = rep.Fleet, rep.Phases
	} else {
		found := false
		for _, j := range rep.Jobs {
			if j.Job == job {
				total, phases, found = j.Total, j.Phases, true
			}
		}
		if !found {
			return Summary{}, false
		}
	}
	if phase == allScope {
		return total, true
	}
	for _, p := range phases {
		if p.Phase == phase {
			return p, true
		}
	}
	return Summary{}, false
}

func checkExpectation(t *testing.T, where string, rep Report, spec string) {
	t.Helper()
	f := strings.Fields(spec)
	if len(f) < 3 {
		t.Errorf("%s: want # expect <job> <phase> key=value ...", where)
		return
	}
	s, ok := scope(rep, f[0], f[1])
	if !ok {
		t.Errorf("%s: no scope job=%s phase=%s in the report", where, f[0], f[1])
		return
	}
	for _, kv := range f[2:] {
		k, v, _ := strings.Cut(kv, "=")
		want, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Errorf("%s: %s: %v", where, kv, err)
			continue
		}
		var got float64
		switch k {
		case "sg":
			got = s.SG
		case "rg":
			got = s.RG
		case "pg":
			got = s.PG
		case "mpg":
			got = s.MPG
		case "capacity":
			got = s.CapacityChipSeconds
		case "demand":
			got = s.DemandChipSeconds
		case "held":
			got = s.HeldChipSeconds
		case "all_allocated":
			got = s.AllAllocatedChipSeconds
		case "ideal":
			got = s.IdealChipSeconds
		default:
			c, ok := ParseCategory(k)
			if !ok {
				t.Errorf("%s: unknown key %q", where, k)
				continue
			}
			got = s.ChipSeconds[c]
		}
		// Hand-derived values are written to 4 decimals.
		if math.Abs(got-want) > 5e-5 {
			t.Errorf("%s: job=%s phase=%s %s = %.6f, hand-derived %v", where, f[0], f[1], k, got, want)
		}
	}
}

package goodput

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected reports below ---- in testdata/*.txt")

// separator splits a testdata file into the timeline and the expected text
// report (or "error: ..." for a timeline Compute must reject).
const separator = "\n----\n"

// TestData runs every testdata/*.txt case. Each file holds a timeline in the
// text form (see ParseTimeline), then a line "----", then the text report.
// -update rewrites the report part only. The report is a regression check;
// correctness comes from "# expect" lines, derived by hand in the file's
// comments and never rewritten:
//
//	# expect <job|*> <phase|*> key=value ...
//
// keys: sg rg pg mpg capacity demand held all_allocated ideal and every
// category name (chip-seconds).
func TestData(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.txt")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, found := strings.Cut(string(data), separator)
			if !found && !*update {
				t.Fatalf("no %q line; run with -update", strings.TrimSpace(separator))
			}
			var got bytes.Buffer
			rep, err := parseAndCompute(input)
			if err != nil {
				fmt.Fprintf(&got, "error: %v\n", err)
			} else if err := WriteText(&got, rep); err != nil {
				t.Fatal(err)
			}
			if *update {
				out := strings.TrimRight(input, "\n") + separator + got.String()
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if got.String() != want {
				t.Errorf("report differs from %s (run with -update if the change is intended)\n--- got\n%s--- want\n%s", file, got.String(), want)
			}
			expectations := 0
			for n, line := range strings.Split(input, "\n") {
				rest, ok := strings.CutPrefix(line, "# expect ")
				if !ok {
					continue
				}
				expectations++
				if err != nil {
					t.Errorf("line %d: expectation on a timeline Compute rejected", n+1)
					continue
				}
				checkExpectation(t, n+1, rep, rest)
			}
			if err == nil && expectations == 0 {
				t.Errorf("%s has no hand-derived # expect lines", file)
			}
		})
	}
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

func checkExpectation(t *testing.T, line int, rep Report, spec string) {
	t.Helper()
	f := strings.Fields(spec)
	if len(f) < 3 {
		t.Errorf("line %d: want # expect <job> <phase> key=value ...", line)
		return
	}
	s, ok := scope(rep, f[0], f[1])
	if !ok {
		t.Errorf("line %d: no scope job=%s phase=%s in the report", line, f[0], f[1])
		return
	}
	for _, kv := range f[2:] {
		k, v, _ := strings.Cut(kv, "=")
		want, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Errorf("line %d: %s: %v", line, kv, err)
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
				t.Errorf("line %d: unknown key %q", line, k)
				continue
			}
			got = s.ChipSeconds[c]
		}
		// Hand-derived values are written to 4 decimals.
		if math.Abs(got-want) > 5e-5 {
			t.Errorf("line %d: job=%s phase=%s %s = %.6f, hand-derived %v", line, f[0], f[1], k, got, want)
		}
	}
}

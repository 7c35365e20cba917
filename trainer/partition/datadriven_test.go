package partition

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Data-driven plan cases: each testdata/plans/*.txt file holds a JSON
// configuration (lines starting with # are comments), a line "----", and
// expectations, one a line:
//
//	solver heuristic|exact|both        which solvers to run (default both)
//	error <text>                       Solve or ParseConfig fails mentioning text
//	error-is oom|invalid               ... wrapping ErrOutOfMemory / ErrInvalidProblem
//	<metric> <op> <number>             metric: load_imbalance, gap, cost_ns,
//	                                   max_hbm_bytes_per_chip, shards; op: == <= >= < >
//	                                   (== allows a relative 1e-9)
//	strategy <table> <s>[|<s>...]      the table's strategy is one of these
//	not-strategy <table> <s>           ... is not this
//	layout <table> c=<n> k=<n> <dist>  exact layout
//	optimal true                       the exact solver proved optimality
func TestDataDrivenPlans(t *testing.T) {
	files, err := filepath.Glob("testdata/plans/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			config, expect, ok := strings.Cut(string(data), "\n----\n")
			if !ok {
				t.Fatalf("%s: no ---- separator", f)
			}
			var cfgLines []string
			for _, l := range strings.Split(config, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "#") {
					cfgLines = append(cfgLines, l)
				}
			}
			var lines [][]string
			solvers := []Solver{Heuristic, Exact}
			for _, l := range strings.Split(expect, "\n") {
				fs := strings.Fields(l)
				if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
					continue
				}
				if fs[0] == "solver" && len(fs) == 2 {
					switch fs[1] {
					case "heuristic":
						solvers = []Solver{Heuristic}
					case "exact":
						solvers = []Solver{Exact}
					}
					continue
				}
				lines = append(lines, fs)
			}
			for _, s := range solvers {
				p, err := ParseConfig([]byte(strings.Join(cfgLines, "\n")))
				var plan *Plan
				if err == nil {
					plan, err = Solve(p, Options{Solver: s})
				}
				for _, fs := range lines {
					if msg := checkExpectation(fs, plan, err); msg != "" {
						t.Errorf("%s (%s): %q: %s", filepath.Base(f), s, strings.Join(fs, " "), msg)
					}
				}
				if err != nil && !hasErrorExpectation(lines) {
					t.Errorf("%s (%s): unexpected error: %v", filepath.Base(f), s, err)
				}
			}
		})
	}
}

func hasErrorExpectation(lines [][]string) bool {
	for _, fs := range lines {
		if fs[0] == "error" || fs[0] == "error-is" {
			return true
		}
	}
	return false
}

func checkExpectation(fs []string, plan *Plan, err error) string {
	switch fs[0] {
	case "error":
		want := strings.Join(fs[1:], " ")
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Sprintf("got error %v", err)
		}
		return ""
	case "error-is":
		target := map[string]error{"oom": ErrOutOfMemory, "invalid": ErrInvalidProblem}[fs[1]]
		if target == nil || !errors.Is(err, target) {
			return fmt.Sprintf("got error %v", err)
		}
		return ""
	}
	if err != nil || plan == nil {
		return "no plan"
	}
	layout := func(name string) *Layout {
		for i := range plan.Layouts {
			if plan.Layouts[i].Table == name {
				return &plan.Layouts[i]
			}
		}
		return nil
	}
	switch fs[0] {
	case "strategy", "not-strategy":
		l := layout(fs[1])
		if l == nil {
			return "no such table"
		}
		in := false
		for _, s := range strings.Split(fs[2], "|") {
			in = in || s == l.Strategy
		}
		if in != (fs[0] == "strategy") {
			return fmt.Sprintf("strategy is %s (c=%d k=%d %v)", l.Strategy, l.ColSplits, l.RowParts, l.RowDist)
		}
		return ""
	case "layout":
		l := layout(fs[1])
		if l == nil {
			return "no such table"
		}
		if got := fmt.Sprintf("c=%d k=%d %v", l.ColSplits, l.RowParts, l.RowDist); got != strings.Join(fs[2:], " ") {
			return "layout is " + got
		}
		return ""
	case "optimal":
		if plan.Solver == string(Exact) && !plan.Optimal {
			return fmt.Sprintf("not proved optimal (gap %v, %d nodes)", plan.Gap, plan.Nodes)
		}
		return ""
	}
	if len(fs) != 3 {
		return "malformed expectation"
	}
	var got float64
	switch fs[0] {
	case "load_imbalance":
		got = plan.LoadImbalance
	case "gap":
		got = plan.Gap
	case "cost_ns":
		got = plan.CostNS
	case "max_hbm_bytes_per_chip":
		got = float64(plan.MaxHBMBytesPerChip)
	case "shards":
		got = float64(len(plan.Shards))
	default:
		return "unknown metric"
	}
	want, perr := strconv.ParseFloat(fs[2], 64)
	if perr != nil {
		return perr.Error()
	}
	ok := false
	switch fs[1] {
	case "==":
		ok = math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
	case "<=":
		ok = got <= want
	case ">=":
		ok = got >= want
	case "<":
		ok = got < want
	case ">":
		ok = got > want
	default:
		return "unknown operator"
	}
	if !ok {
		return fmt.Sprintf("got %v", got)
	}
	return ""
}

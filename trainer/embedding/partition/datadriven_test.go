package partition

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Data-driven plan cases: each testdata/plans/*.txt file is a
// github.com/cockroachdb/datadriven script whose case
//
//	solve [solver=heuristic|exact|both]   which solvers to run (default both)
//	<JSON configuration>
//	----
//	<expectations>
//
// runs the solvers on the configuration and checks the expectations, one a
// line, against every solver's result:
//
//	error <text>                       Solve or ParseConfig fails mentioning text
//	error-is oom|invalid               ... wrapping ErrOutOfMemory / ErrInvalidProblem
//	<metric> <op> <number>             metric: load_imbalance, gap, cost_ns,
//	                                   max_hbm_bytes_per_chip, shards; op: == <= >= < >
//	                                   (== allows a relative 1e-9)
//	strategy <table> <s>[|<s>...]      the table's strategy is one of these
//	not-strategy <table> <s>           ... is not this
//	layout <table> c=<n> k=<n> <dist>  exact layout
//	optimal true                       the exact solver proved optimality
//
// The expectations are predicates, not printed results: the case's output
// is the expectation lines, each one that does not hold followed by
// "  <- solver: what it got", then any error no expectation expected. So
// go test -rewrite writes back the same lines, and refuses (fails) when one
// does not hold.
func TestDataDrivenPlans(t *testing.T) {
	datadriven.Walk(t, "testdata/plans", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "solve" {
				td.Fatalf(t, "unknown command %q", td.Cmd)
			}
			solvers := []Solver{Heuristic, Exact}
			if a, ok := td.Arg("solver"); ok {
				switch v := a.SingleVal(t); v {
				case "heuristic":
					solvers = []Solver{Heuristic}
				case "exact":
					solvers = []Solver{Exact}
				case "both":
				default:
					td.Fatalf(t, "unknown solver %q", v)
				}
			}
			var written []string
			if td.Expected != "" {
				written = strings.Split(strings.TrimSuffix(td.Expected, "\n"), "\n")
			}
			var lines [][]string
			var lineOf []int // index into written of each of lines
			for i, l := range written {
				fs := strings.Fields(l)
				if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
					continue
				}
				lines = append(lines, fs)
				lineOf = append(lineOf, i)
			}
			failed := make([][]string, len(written))
			var unexpected []string
			for _, s := range solvers {
				p, err := ParseConfig([]byte(td.Input))
				var plan *Plan
				if err == nil {
					plan, err = Solve(p, Options{Solver: s})
				}
				for j, fs := range lines {
					if msg := checkExpectation(fs, plan, err); msg != "" {
						failed[lineOf[j]] = append(failed[lineOf[j]], fmt.Sprintf("%s: %s", s, msg))
					}
				}
				if err != nil && !hasErrorExpectation(lines) {
					unexpected = append(unexpected, fmt.Sprintf("unexpected error (%s): %v", s, err))
				}
			}
			out := append([]string(nil), written...)
			bad := len(unexpected) > 0
			for i, f := range failed {
				if f != nil {
					out[i] += "  <- " + strings.Join(f, "; ")
					bad = true
				}
			}
			out = append(out, unexpected...)
			if bad && td.Rewrite {
				td.Fatalf(t, "expectations do not hold, not rewriting them:\n%s", strings.Join(out, "\n"))
			}
			return strings.Join(out, "\n")
		})
	})
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

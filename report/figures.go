package report

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/internal/svgplot"
)

// figureTables adds a file's figures (internal/figure) to s: a table of
// every figure with its kind and the paper's value, the constants with
// their sources, and one plot per swept constant and family of figures.
func figureTables(s *Section, set figure.Set, caption string) {
	names := slices.Sorted(maps.Keys(set))
	t := Table{Caption: caption, Header: []string{"figure", "value", "kind", "paper", "how; deciding constants"}}
	consts := map[string]figure.Constant{}
	for _, n := range names {
		f := set[n]
		paper := ""
		if f.Paper != nil {
			paper = num(f.Paper.Value) + " (" + f.Paper.Where + ")"
		}
		how := f.How
		if len(f.Constants) > 0 {
			how += "; " + strings.Join(slices.Sorted(maps.Keys(f.Constants)), ", ")
		}
		t.Rows = append(t.Rows, []string{n, num(f.Value) + unit(f.Unit), string(f.Kind), paper, how})
		maps.Copy(consts, f.Constants)
	}
	s.table(t)
	if len(consts) > 0 {
		ct := Table{Caption: "The constants, their values and sources (guess: no public source gives the value; measured: a measurement of this system replaced it)",
			Header: []string{"constant", "value", "source"}}
		for _, n := range slices.Sorted(maps.Keys(consts)) {
			c := consts[n]
			ct.Rows = append(ct.Rows, []string{n, strconv.FormatFloat(c.Value, 'g', 6, 64) + unit(c.Unit), c.Source})
		}
		s.table(ct)
	}
	sweepPlots(s, set)
}

func unit(u string) string {
	switch u {
	case "", "fraction":
		return ""
	case "x":
		return "x"
	}
	return " " + u
}

// modelSuffix is a per-model figure's suffix (speedup_A), or the closed
// form of a simulated figure: each family is drawn on one plot.
var modelSuffix = regexp.MustCompile(`(_[A-Z]|_closed_form)$`)

// family is a figure's name without its model suffix.
func family(name string) string { return modelSuffix.ReplaceAllString(name, "") }

// sweepPlots draws, for each swept constant, the figures that sweep it:
// one plot per constant and family (speedup_A..E together), each figure a
// line of its value against the constant.
func sweepPlots(s *Section, set figure.Set) {
	type key struct{ constant, family string }
	groups := map[key][]string{}
	for _, n := range slices.Sorted(maps.Keys(set)) {
		seen := map[string]bool{}
		for _, p := range set[n].Sweep {
			if !seen[p.Constant] {
				seen[p.Constant] = true
				k := key{p.Constant, family(n)}
				groups[k] = append(groups[k], n)
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b key) int {
		return strings.Compare(a.family+"\x00"+a.constant, b.family+"\x00"+b.constant)
	})
	for _, k := range keys {
		names := groups[k]
		first := set[names[0]]
		c := first.Constants[k.constant]
		var series []svgplot.Series
		var marks []svgplot.Mark
		var figs []figure.Figure
		allPositive, lo, hi := true, math.Inf(1), math.Inf(-1)
		for _, n := range names {
			f := set[n]
			figs = append(figs, f)
			sr := svgplot.Series{Name: n}
			for _, p := range f.SweepOf(k.constant) {
				sr.X, sr.Y = append(sr.X, p.At), append(sr.Y, p.Value)
				allPositive = allPositive && p.At > 0
				lo, hi = math.Min(lo, p.At), math.Max(hi, p.At)
			}
			series = append(series, sr)
			if f.Paper != nil && len(marks) < 2 {
				marks = append(marks, svgplot.Mark{Label: fmt.Sprintf("paper %s: %s", n, num(f.Paper.Value)), Y: f.Paper.Value})
			}
		}
		percent := first.Unit == "fraction"
		title := fmt.Sprintf("%s against %s", k.family, k.constant)
		caption := fmt.Sprintf("Each figure recomputed with %s changed, every other constant at its listed value; %s's value here: %s%s (%s).",
			k.constant, k.constant, num(c.Value), unit(c.Unit), c.Source)
		s.plot("sweep-"+slug(k.family)+"-"+slug(k.constant), Plot{Title: title, Kind: kindOf(figs...), Paper: paperOf(figs), Caption: caption,
			SVG: svgplot.Line{Title: title, X: svgplot.Axis{Label: k.constant + unit(c.Unit), Log: allPositive && hi/lo >= 50},
				Y: svgplot.Axis{Label: strings.TrimSpace(k.family + unit(first.Unit)), Percent: percent}, Series: series, Marks: marks}.SVG()})
	}
}

func paperOf(fs []figure.Figure) string {
	for _, f := range fs {
		if f.Paper != nil {
			return f.Paper.Where
		}
	}
	return ""
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug makes a file-name part of a name.
func slug(s string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

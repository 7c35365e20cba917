package ui

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

func num(t *testing.T, s string) float64 {
	t.Helper()
	if s == "-" {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return v
}

// TestTicks: the y axis' ticks for a data maximum, and the time axis'
// spacing for a span (testdata/ticks.txt).
func TestTicks(t *testing.T) {
	datadriven.RunTest(t, "testdata/ticks.txt", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "y":
			var max string
			td.ScanArgs(t, "max", &max)
			percent := td.HasArg("percent")
			ticks := yTicks(num(t, max), td.HasArg("fixed"), td.HasArg("integer"))
			var labels []string
			for _, v := range ticks {
				labels = append(labels, tickLabel(v, ticks, percent))
			}
			return strings.Join(labels, " ")
		case "time":
			var span string
			td.ScanArgs(t, "span", &span)
			d, err := time.ParseDuration(span)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			return timeStep(d).String()
		}
		td.Fatalf(t, "unknown command %q", td.Cmd)
		return ""
	})
}

// parseChart reads a chart from a case: "chart unit=U [percent] [integer]
// [ymax=Y] series=(a, b)", and as input one "HH:MM:SS v1 v2 ..." line per
// sample on 2026-01-01, values in series order ("-" for none).
func parseChart(t *testing.T, td *datadriven.TestData) chartSpec {
	c := chartSpec{Title: "test chart", Percent: td.HasArg("percent"), Integer: td.HasArg("integer")}
	for _, a := range td.CmdArgs {
		switch a.Key {
		case "unit":
			c.Unit = strings.Join(a.Vals, ", ")
		case "ymax":
			c.YMax = num(t, a.Vals[0])
		case "series":
			for i, name := range a.Vals {
				c.Series = append(c.Series, chartSeries{Name: name, Class: fmt.Sprintf("s%d", i)})
			}
		}
	}
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, l := range strings.Split(td.Input, "\n") {
		f := strings.Fields(l)
		at, err := time.Parse("15:04:05", f[0])
		if err != nil {
			td.Fatalf(t, "%v", err)
		}
		c.Times = append(c.Times, day.Add(at.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))))
		if len(f)-1 != len(c.Series) {
			td.Fatalf(t, "%q: %d values for %d series", l, len(f)-1, len(c.Series))
		}
		for k := range c.Series {
			c.Series[k].Values = append(c.Series[k].Values, num(t, f[1+k]))
		}
	}
	return c
}

// TestCharts pins whole charts (testdata/charts.txt): the markup is the
// chart, so a change to it is reviewed as a diff.
func TestCharts(t *testing.T) {
	datadriven.RunTest(t, "testdata/charts.txt", func(t *testing.T, td *datadriven.TestData) string {
		return string(renderChart(parseChart(t, td)))
	})
}

var (
	textRE  = regexp.MustCompile(`<text class="([^"]+)" x="([-0-9.]+)" y="([-0-9.]+)">([^<]*)</text>`)
	lineRE  = regexp.MustCompile(`<polyline class="line s\d" points="([^"]+)"/>`)
	titleRE = regexp.MustCompile(`<title>([^<]*)</title>`)
)

// TestChartReadable checks what makes a chart readable, whatever its data:
// a fixed aspect ratio, every label outside the plot area (never over a
// line), every line inside it, a hover title per sample with its time and
// values, the current and largest values beside the chart, and names
// escaped.
func TestChartReadable(t *testing.T) {
	t0 := time.Date(2026, 5, 9, 14, 0, 3, 0, time.UTC)
	var times []time.Time
	var queued, mpg []float64
	for i := 0; i < 40; i++ {
		times = append(times, t0.Add(time.Duration(i)*5*time.Second))
		q := 0.0
		if i == 17 {
			q = 81 // a burst
		}
		queued = append(queued, q)
		mpg = append(mpg, 0.04+0.01*math.Sin(float64(i)))
	}
	for _, c := range []chartSpec{
		{Title: "queue", Unit: "tasks", Integer: true, Times: times, Series: []chartSeries{{Name: "queued <b>tasks</b>", Class: "s0", Values: queued}}},
		{Title: "mpg", Unit: "MPG", Percent: true, Times: times, Series: []chartSeries{{Name: "MPG", Class: "s0", Values: mpg}}},
	} {
		t.Run(c.Title, func(t *testing.T) {
			html := string(renderChart(c))
			if strings.Contains(html, "preserveAspectRatio") {
				t.Error("the chart is stretched (preserveAspectRatio)")
			}
			if strings.Contains(c.Series[0].Name, "<") && (strings.Contains(html, "<b>tasks</b>") || !strings.Contains(html, "&lt;b&gt;tasks&lt;/b&gt;")) {
				t.Error("a series name is not escaped")
			}
			var xs, ys []string
			for _, m := range textRE.FindAllStringSubmatch(html, -1) {
				x, y := num(t, m[2]), num(t, m[3])
				// Labels sit left of the y axis, above the plot area (the
				// y unit) or below the time axis.
				if !(x <= plotL || y < plotT || y > plotB) {
					t.Errorf("label %q at (%g, %g) is inside the plot area", m[4], x, y)
				}
				if x < 0 || x > chartW || y < 0 || y > chartH {
					t.Errorf("label %q at (%g, %g) is outside the chart", m[4], x, y)
				}
				switch m[1] {
				case "tick y":
					ys = append(ys, m[4])
				case "tick x":
					xs = append(xs, m[4])
				}
			}
			if len(ys) < 3 || len(xs) < 3 {
				t.Errorf("y ticks %q, time ticks %q", ys, xs)
			}
			for _, x := range xs {
				if _, err := time.Parse("15:04:05", x); err != nil {
					if _, err := time.Parse("15:04", x); err != nil {
						t.Errorf("time tick %q is not a wall-clock time", x)
					}
				}
			}
			if !strings.Contains(html, ">"+c.Unit+"</text>") || !strings.Contains(html, ">UTC</text>") {
				t.Error("an axis has no unit")
			}
			for _, m := range lineRE.FindAllStringSubmatch(html, -1) {
				for _, p := range strings.Fields(m[1]) {
					xs, ys, _ := strings.Cut(p, ",")
					if x, y := num(t, xs), num(t, ys); x < plotL || x > plotR || y < plotT || y > plotB {
						t.Errorf("line point (%g, %g) outside the plot area", x, y)
					}
				}
			}
			titles := titleRE.FindAllStringSubmatch(html, -1)
			if len(titles) != len(times) {
				t.Fatalf("%d hover titles for %d samples", len(titles), len(times))
			}
			want := valueText(c.Series[0].Values[17], c)
			if tt := titles[17][1]; !strings.HasPrefix(tt, "14:01:28 UTC") || !strings.Contains(tt, ": "+want) {
				t.Errorf("hover title of sample 17: %q, want its time and %s", tt, want)
			}
			last := valueText(c.Series[0].Values[len(times)-1], c)
			if !strings.Contains(html, `now <b class="now">`+last+`</b>`) {
				t.Errorf("current value %s not printed", last)
			}
			peak := 0.0
			for _, v := range c.Series[0].Values {
				peak = math.Max(peak, v)
			}
			if !strings.Contains(html, `max <b class="max">`+valueText(peak, c)+`</b>`) {
				t.Errorf("largest value %s not printed", valueText(peak, c))
			}
		})
	}
}

// TestChartDownsampleKeepsBursts: a long series is drawn as the largest
// value of each run of samples, so a one-sample burst still shows.
func TestChartDownsampleKeepsBursts(t *testing.T) {
	t0 := time.Date(2026, 5, 9, 14, 0, 0, 0, time.UTC)
	var times []time.Time
	var v []float64
	for i := 0; i < maxSamples; i++ {
		times = append(times, t0.Add(time.Duration(i)*5*time.Second))
		v = append(v, 0)
	}
	v[301] = 81
	html := string(renderChart(chartSpec{Unit: "tasks", Integer: true, Times: times, Series: []chartSeries{{Name: "q", Class: "s0", Values: v}}}))
	titles := titleRE.FindAllStringSubmatch(html, -1)
	if len(titles) > maxColumns {
		t.Errorf("%d hover targets, at most %d", len(titles), maxColumns)
	}
	found := false
	for _, m := range titles {
		if strings.Contains(m[1], "largest of 3 samples") && strings.HasSuffix(m[1], "q: 81") {
			found = true
		}
	}
	if !found {
		t.Error("the burst is not in any hover title")
	}
	if !strings.Contains(html, `max <b class="max">81</b>`) {
		t.Error("the burst is not the printed max")
	}
}

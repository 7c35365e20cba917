package ui

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/sigdata/sig/internal/svgplot"
)

// chart.go draws the overview's time series as inline SVG on the server: no
// script (the CSP allows none), a fixed aspect ratio (text is never
// stretched), a y axis with its unit and ticks chosen from the data, a time
// axis in UTC, every sample's values as a hover title, and the current and
// largest value of each series printed beside the chart, never over it. It
// is a pure function of its input (testdata/charts.txt pins its output).

// chartSeries is one line of a chart: Values[i] is its value at the chart's
// Times[i]; NaN where it has none (a trainer that had not reported yet), which
// leaves a gap.
type chartSeries struct {
	Name   string // legend and hover text (escaped: it may name a user's job)
	Class  string // CSS class of the line and its key: s0 (blue) or s1 (amber)
	Values []float64
}

// chartSpec is a chart's input.
type chartSpec struct {
	Title string // the chart's accessible name
	// Unit names the y axis' quantity, printed above it ("tasks", "MPG").
	Unit string
	// Percent shows values, which are ratios, as percentages.
	Percent bool
	// Integer values are counts: y ticks are whole numbers.
	Integer bool
	// YMax fixes the top of the y axis (a hit rate: 1); 0 scales the axis
	// to the data, from a 0 baseline, so that an MPG of 0.05 is not a flat
	// line at the bottom of a 0–1 scale.
	YMax   float64
	Times  []time.Time
	Series []chartSeries
}

// Geometry of every chart, in SVG user units (CSS pixels at full size; a
// narrower container scales the whole drawing, text included, uniformly).
const (
	chartW, chartH = 560.0, 180.0
	plotL, plotR   = 56.0, chartW - 28 // y tick labels left of plotL; room for the last time label
	plotT, plotB   = 22.0, chartH - 26 // the y unit above plotT, times below plotB
	// maxColumns bounds the hover targets: longer series are shown as the
	// largest value of each run of consecutive samples (a burst stays
	// visible at any zoom).
	maxColumns = 280
)

// renderChart returns a chart as an HTML figure: the SVG and a caption with
// each series' current and largest value. Only numbers and escaped text go
// into the markup.
func renderChart(c chartSpec) template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<figure class="chart"><svg class="chart" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`+"\n",
		chartW, chartH, chartW, chartH, esc(c.Title))
	times, series, group := downsample(c.Times, c.Series)
	top := c.YMax
	if top <= 0 {
		for _, s := range series {
			for _, v := range s.Values {
				if v > top {
					top = v
				}
			}
		}
	}
	ticks := yTicks(top, c.YMax > 0, c.Integer)
	top = ticks[len(ticks)-1]
	yOf := func(v float64) float64 { return plotB - (plotB-plotT)*min(max(v, 0), top)/top }

	// The y axis: unit above it, gridlines and tick labels left of it.
	fmt.Fprintf(&b, `<text class="unit" x="4" y="%g">%s</text>`+"\n", plotT-9, esc(c.Unit))
	for _, v := range ticks {
		y := yOf(v)
		fmt.Fprintf(&b, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`+"\n", plotL, y, plotR, y)
		fmt.Fprintf(&b, `<text class="tick y" x="%g" y="%.1f">%s</text>`+"\n", plotL-6, y+4, tickLabel(v, ticks, c.Percent))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="%g" x2="%g" y2="%g"/>`+"\n", plotL, plotT, plotL, plotB)
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="%g" x2="%g" y2="%g"/>`+"\n", plotL, plotB, plotR, plotB)
	fmt.Fprintf(&b, `<text class="unit" x="4" y="%g">UTC</text>`+"\n", plotB+16)

	if len(times) < 2 {
		fmt.Fprintf(&b, `<text class="empty" x="%g" y="%g">collecting samples…</text></svg>`+"\n", (plotL+plotR)/2, (plotT+plotB)/2)
		b.WriteString(caption(c, series, times))
		return template.HTML(b.String())
	}
	t0, t1 := times[0], times[len(times)-1]
	span := t1.Sub(t0)
	xOf := func(t time.Time) float64 {
		if span <= 0 {
			return plotL
		}
		return plotL + (plotR-plotL)*float64(t.Sub(t0))/float64(span)
	}
	// The time axis: wall-clock ticks at round times.
	step := timeStep(span)
	layout := "15:04:05"
	if step >= time.Minute {
		layout = "15:04"
	}
	for t := t0.Truncate(step); !t.After(t1); t = t.Add(step) {
		if t.Before(t0) {
			continue
		}
		x := xOf(t)
		fmt.Fprintf(&b, `<line class="axis" x1="%.1f" y1="%g" x2="%.1f" y2="%g"/>`+"\n", x, plotB, x, plotB+4)
		fmt.Fprintf(&b, `<text class="tick x" x="%.1f" y="%g">%s</text>`+"\n", x, plotB+16, t.UTC().Format(layout))
	}

	// The lines: one polyline per run of values, a dot for a lone value.
	for _, s := range series {
		var pts []string
		flush := func() {
			switch len(pts) {
			case 0:
			case 1:
				x, y, _ := strings.Cut(pts[0], ",")
				fmt.Fprintf(&b, `<circle class="line %s" cx="%s" cy="%s" r="2"/>`+"\n", s.Class, x, y)
			default:
				fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`+"\n", s.Class, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for i, v := range s.Values {
			if math.IsNaN(v) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(times[i]), yOf(v)))
		}
		flush()
	}

	// Hover targets: a transparent column per sample whose title holds the
	// sample's time and values (a browser shows it as a tooltip).
	for i, t := range times {
		left, right := plotL, plotR
		if i > 0 {
			left = (xOf(times[i-1]) + xOf(t)) / 2
		}
		if i < len(times)-1 {
			right = (xOf(t) + xOf(times[i+1])) / 2
		}
		when := t.UTC().Format("15:04:05") + " UTC"
		if group > 1 {
			first, n := i*group, min(group, len(c.Times)-i*group)
			when = fmt.Sprintf("%s–%s UTC, largest of %d samples", c.Times[first].UTC().Format("15:04:05"), t.UTC().Format("15:04:05"), n)
		}
		var title strings.Builder
		title.WriteString(when)
		for _, s := range series {
			fmt.Fprintf(&title, "\n%s: %s", s.Name, valueText(s.Values[i], c))
		}
		fmt.Fprintf(&b, `<rect class="hover" x="%.1f" y="%g" width="%.1f" height="%g"><title>%s</title></rect>`+"\n",
			left, plotT, right-left, plotB-plotT, esc(title.String()))
	}
	b.WriteString("</svg>\n")
	b.WriteString(caption(c, series, times))
	return template.HTML(b.String())
}

// caption prints each series' current (last) value and its largest, with
// when it was reached.
func caption(c chartSpec, series []chartSeries, times []time.Time) string {
	var b strings.Builder
	b.WriteString("<figcaption>\n")
	for _, s := range series {
		cur, peak, at := math.NaN(), math.NaN(), -1
		for i, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			cur = v
			if at < 0 || v > peak {
				peak, at = v, i
			}
		}
		fmt.Fprintf(&b, `<span class="series"><span class="key %s"></span>%s: now <b class="now">%s</b>`,
			s.Class, template.HTMLEscapeString(s.Name), valueText(cur, c))
		if at >= 0 {
			fmt.Fprintf(&b, `, max <b class="max">%s</b> at %s`, valueText(peak, c), times[at].UTC().Format("15:04:05"))
		}
		b.WriteString("</span>\n")
	}
	b.WriteString(`</figcaption></figure>`)
	return b.String()
}

// downsample returns at most maxColumns samples: each run of group
// consecutive samples becomes its last time and each series' largest value
// in it.
func downsample(times []time.Time, series []chartSeries) ([]time.Time, []chartSeries, int) {
	if len(times) <= maxColumns {
		return times, series, 1
	}
	group := (len(times) + maxColumns - 1) / maxColumns
	var ts []time.Time
	for i := group - 1; i < len(times); i += group {
		ts = append(ts, times[i])
	}
	if len(times)%group != 0 {
		ts = append(ts, times[len(times)-1])
	}
	out := make([]chartSeries, len(series))
	for k, s := range series {
		out[k] = chartSeries{Name: s.Name, Class: s.Class}
		for i := 0; i < len(times); i += group {
			m := math.NaN()
			for _, v := range s.Values[i:min(i+group, len(s.Values))] {
				if !math.IsNaN(v) && (math.IsNaN(m) || v > m) {
					m = v
				}
			}
			out[k].Values = append(out[k].Values, m)
		}
	}
	return ts, out, group
}

// yTicks returns the y axis' tick values, from 0 to the axis' top: with a
// fixed top, that top in steps; otherwise the smallest round top (1, 2, 2.5
// or 5 times a power of ten, at most 4 steps) that holds max. Integer axes
// step by whole numbers. An all-zero series gets the axis 0–1.
func yTicks(max float64, fixed, integer bool) []float64 {
	if !(max > 0) || math.IsInf(max, 0) {
		max = 1
	}
	step := svgplot.NiceStep(max / 4)
	if integer && step != math.Trunc(step) {
		step = math.Max(1, svgplot.NiceStep(math.Ceil(step)))
		if step != math.Trunc(step) { // 2.5
			step = 5
		}
	}
	n := int(math.Ceil(max/step - 1e-9))
	if fixed && math.Abs(float64(n)*step-max) > 1e-9*max {
		// A fixed top is the top even if no round step reaches it exactly.
		out := make([]float64, 0, n+1)
		for i := 0; i < n; i++ {
			out = append(out, svgplot.RoundTo(float64(i)*step, step))
		}
		return append(out, max)
	}
	out := make([]float64, 0, n+1)
	for i := 0; i <= n; i++ {
		out = append(out, svgplot.RoundTo(float64(i)*step, step))
	}
	return out
}

// decimals is how many decimal digits v needs (at most 9).
func decimals(v float64) int {
	for d := 0; d < 9; d++ {
		x := v * math.Pow(10, float64(d))
		if math.Abs(x-math.Round(x)) < 1e-6 {
			return d
		}
	}
	return 9
}

// tickLabel formats a tick with as many decimals as the axis' steps need.
func tickLabel(v float64, ticks []float64, percent bool) string {
	scale, suffix := 1.0, ""
	if percent {
		scale, suffix = 100, "%"
	}
	d := 0
	for _, t := range ticks {
		d = max(d, decimals(t*scale))
	}
	return fmt.Sprintf("%.*f%s", d, v*scale, suffix)
}

// valueText formats one value for the caption and hover titles; "–" when
// there is none.
func valueText(v float64, c chartSpec) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case c.Percent && v == 0:
		return "0%"
	case c.Percent && v < 0.1:
		return fmt.Sprintf("%.2f%%", 100*v)
	case c.Percent:
		return fmt.Sprintf("%.1f%%", 100*v)
	case c.Integer:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// timeSteps are the time axis' tick spacings.
var timeSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// timeStep is the smallest tick spacing that puts at most 5 ticks on span
// (labels are about 50 units wide, the axis about 500).
func timeStep(span time.Duration) time.Duration {
	for _, s := range timeSteps {
		if span/s < 5 {
			return s
		}
	}
	return timeSteps[len(timeSteps)-1]
}

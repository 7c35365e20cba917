package svgplot

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Axis is one axis of a plot.
type Axis struct {
	// Label names the quantity and its unit ("pipelines", "CPU s").
	Label string
	// Log draws the axis in powers of ten; values that are not positive
	// are left out.
	Log bool
	// Percent shows the values, which are ratios, as percentages.
	Percent bool
	// Max fixes the axis' top (a hit rate: 1); 0 chooses it from the data.
	Max float64
}

// Series is one line: the points (X[i], Y[i]); a point with a value that
// is not finite (or not positive on a log axis) is a gap.
type Series struct {
	Name string
	X, Y []float64
}

// Mark is a dashed horizontal reference line at Y, labelled (the paper's
// figure, a target).
type Mark struct {
	Label string
	Y     float64
}

// Line is a line plot.
type Line struct {
	Title  string
	X, Y   Axis
	Series []Series
	Marks  []Mark
}

// Group is one set of bars: Values[i] is its bar in category i.
type Group struct {
	Name   string
	Values []float64
}

// Bars is a bar chart: one bar per group in each category, side by side,
// or stacked when Stacked is set.
type Bars struct {
	Title string
	// XLabel names what the categories are.
	XLabel     string
	Categories []string
	Y          Axis
	Groups     []Group
	// Stacked stacks the groups' bars (on a linear axis).
	Stacked bool
	Marks   []Mark
}

// Geometry, in SVG user units.
const (
	width     = 640.0
	plotL     = 72.0
	plotR     = width - 24
	plotT     = 46.0 // the title above, then the y axis' label
	plotB     = plotT + 210
	legendTop = plotB + 56 // below the x tick labels and the x label
	legendRow = 18.0
	charW     = 6.6 // a character of 11-unit text, roughly: to lay out labels
	font      = `font-family="sans-serif"`
)

// palette holds the series' colours, distinct for readers with common
// colour-vision deficiencies (Okabe and Ito's).
var palette = []string{"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"}

func colour(i int) string { return palette[i%len(palette)] }

// esc escapes text for XML content and attribute values.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&#34;")
		case '\'':
			b.WriteString("&#39;")
		default:
			if r < 0x20 && r != '\n' && r != '\t' && r != '\r' {
				continue // not allowed in XML 1.0
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// f formats a coordinate.
func f(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// Num formats a value for a label: at most 4 significant digits, with k, M
// and G for thousands, millions and billions; as a percentage when percent.
func Num(v float64, percent bool) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	if percent {
		return sig(100*v, 3) + "%"
	}
	for _, u := range []struct {
		at     float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= u.at {
			return sig(v/u.at, 4) + u.suffix
		}
	}
	return sig(v, 4)
}

// sig formats v with at most n significant digits, no trailing zeros.
func sig(v float64, n int) string {
	if v == 0 {
		return "0"
	}
	s := strconv.FormatFloat(v, 'g', n, 64)
	if strings.ContainsAny(s, "e") {
		// Small values: plain decimals read better than exponents.
		p, _ := strconv.ParseFloat(s, 64)
		s = strconv.FormatFloat(p, 'f', -1, 64)
	}
	return s
}

// scale maps an axis' values to a coordinate range.
type scale struct {
	log      bool
	lo, hi   float64 // in data units (log: the powers' values)
	from, to float64 // coordinates
	ticks    []float64
}

func (s scale) at(v float64) float64 {
	if s.log {
		return s.from + (s.to-s.from)*(math.Log10(v)-math.Log10(s.lo))/(math.Log10(s.hi)-math.Log10(s.lo))
	}
	return s.from + (s.to-s.from)*(v-s.lo)/(s.hi-s.lo)
}

// ok says whether v can be drawn on the axis.
func (s scale) ok(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!s.log || v > 0)
}

// newScale chooses an axis' range and ticks for values in [lo, hi] (finite;
// positive on a log axis). A linear axis includes zero when zero is true.
func newScale(a Axis, lo, hi float64, zero bool, from, to float64) scale {
	s := scale{log: a.Log, from: from, to: to}
	if a.Log {
		if !(lo > 0) || !(hi > 0) {
			lo, hi = 1, 10
		}
		if a.Max > 0 {
			hi = a.Max
		}
		p0, p1 := math.Floor(math.Log10(lo)+1e-9), math.Ceil(math.Log10(hi)-1e-9)
		if p1 <= p0 {
			p1 = p0 + 1
		}
		for p := p0; p <= p1; p++ {
			s.ticks = append(s.ticks, math.Pow(10, p))
		}
		s.lo, s.hi = s.ticks[0], s.ticks[len(s.ticks)-1]
		return s
	}
	if zero {
		lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	}
	if a.Max > 0 {
		hi = a.Max
	}
	if hi <= lo {
		if lo == 0 {
			hi = 1
		} else {
			lo, hi = lo-math.Abs(lo)/2, hi+math.Abs(hi)/2
		}
	}
	step := NiceStep((hi - lo) / 4)
	start, end := math.Floor(lo/step+1e-9)*step, math.Ceil(hi/step-1e-9)*step
	if a.Max > 0 {
		end = a.Max
	}
	for i := 0; ; i++ {
		v := RoundTo(start+float64(i)*step, step)
		if v > end+step*1e-9 {
			break
		}
		s.ticks = append(s.ticks, v)
	}
	if last := s.ticks[len(s.ticks)-1]; a.Max > 0 && last < a.Max {
		s.ticks = append(s.ticks, a.Max)
	}
	s.lo, s.hi = s.ticks[0], s.ticks[len(s.ticks)-1]
	return s
}

// NiceStep returns the smallest of 1, 2, 2.5, 5 and 10 times a power of
// ten that is at least raw: a round tick step (the web UI's live charts
// use it too).
func NiceStep(raw float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// RoundTo removes the binary noise of i×step (0.1×3 = 0.30000000000000004):
// v rounded to the decimals step has.
func RoundTo(v, step float64) float64 {
	for d := 0; d < 12; d++ {
		p := math.Pow(10, float64(d))
		if x := step * p; math.Abs(x-math.Round(x)) < 1e-6 {
			return math.Round(v*p) / p
		}
	}
	return v
}

// canvas accumulates a plot's markup.
type canvas struct {
	b      strings.Builder
	height float64
}

func (c *canvas) printf(format string, args ...any) { fmt.Fprintf(&c.b, format, args...) }

// open starts the drawing: the root element, a white background and the
// title.
func (c *canvas) open(title string, height float64) {
	c.height = height
	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s" %s font-size="11">`+"\n",
		f(width), f(height), f(width), f(height), esc(title), font)
	c.printf(`<title>%s</title>`+"\n", esc(title))
	c.printf(`<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", f(width), f(height))
	c.printf(`<text x="%s" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", f(8), esc(title))
}

// yAxis draws the y axis: its label above it, gridlines and tick labels.
func (c *canvas) yAxis(a Axis, s scale) {
	c.printf(`<text x="8" y="%s" fill="#333333">%s</text>`+"\n", f(plotT-10), esc(a.Label))
	for _, v := range s.ticks {
		y := s.at(v)
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>`+"\n", f(plotL), f(y), f(plotR), f(y))
		c.printf(`<text x="%s" y="%s" text-anchor="end" fill="#333333">%s</text>`+"\n", f(plotL-6), f(y+4), esc(Num(v, a.Percent)))
	}
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>`+"\n", f(plotL), f(plotT), f(plotL), f(plotB))
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>`+"\n", f(plotL), f(plotB), f(plotR), f(plotB))
}

// xLabel names the x axis below its tick labels.
func (c *canvas) xLabel(label string) {
	c.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", f((plotL+plotR)/2), f(plotB+34), esc(label))
}

// marks draws the reference lines that fall on the axis, their labels at
// the left end above the line (below it near the top): where a curve
// starting cold is least likely to be.
func (c *canvas) marks(ms []Mark, s scale) {
	type placed struct{ x0, x1, y float64 }
	var labels []placed
	for _, m := range ms {
		if !s.ok(m.Y) || m.Y < s.lo || m.Y > s.hi {
			continue
		}
		y := s.at(m.Y)
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#555555" stroke-dasharray="5 4"><title>%s</title></line>`+"\n",
			f(plotL), f(y), f(plotR), f(y), esc(m.Label))
		ty := y - 4
		if ty < plotT+12 {
			ty = y + 13
		}
		// Labels of close marks go side by side, not over each other.
		x, w := plotL+4, charW*float64(len([]rune(m.Label)))
		for moved := true; moved; {
			moved = false
			for _, p := range labels {
				if math.Abs(p.y-ty) < 12 && x < p.x1 && x+w > p.x0 {
					x, moved = p.x1+10, true
				}
			}
		}
		labels = append(labels, placed{x, x + w, ty})
		c.printf(`<text x="%s" y="%s" fill="#555555">%s</text>`+"\n", f(x), f(ty), esc(m.Label))
	}
}

// legendRows lays the names out in rows under the plot; it returns each
// name's position and the rows used.
func legendRows(names []string) (pos [][2]float64, rows int) {
	x, row := plotL, 0
	for _, n := range names {
		w := 18 + charW*float64(len([]rune(n))) + 16
		if x+w > plotR && x > plotL {
			x, row = plotL, row+1
		}
		pos = append(pos, [2]float64{x, legendTop + legendRow*float64(row)})
		x += w
	}
	if len(names) > 0 {
		rows = row + 1
	}
	return pos, rows
}

func height(names []string) float64 {
	_, rows := legendRows(names)
	return legendTop + legendRow*float64(rows) + 4
}

func (c *canvas) legend(names []string, dashed func(int) bool) {
	pos, _ := legendRows(names)
	for i, n := range names {
		x, y := pos[i][0], pos[i][1]
		dash := ""
		if dashed != nil && dashed(i) {
			dash = ` stroke-dasharray="4 3"`
		}
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"%s/>`+"\n", f(x), f(y-4), f(x+14), f(y-4), colour(i), dash)
		c.printf(`<text x="%s" y="%s">%s</text>`+"\n", f(x+18), f(y), esc(n))
	}
}

func (c *canvas) close() string {
	c.b.WriteString("</svg>\n")
	return c.b.String()
}

// SVG draws the line plot.
func (l Line) SVG() string {
	// The data's extent on each axis, over the points that can be drawn.
	xs0, ys0 := scale{log: l.X.Log}, scale{log: l.Y.Log}
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range l.Series {
		for i := range min(len(s.X), len(s.Y)) {
			x, y := s.X[i], s.Y[i]
			if xs0.ok(x) && ys0.ok(y) {
				xlo, xhi, ylo, yhi = math.Min(xlo, x), math.Max(xhi, x), math.Min(ylo, y), math.Max(yhi, y)
			}
		}
	}
	empty := math.IsInf(xlo, 1)
	if empty {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	for _, m := range l.Marks {
		if ys0.ok(m.Y) && l.Y.Max <= 0 {
			ylo, yhi = math.Min(ylo, m.Y), math.Max(yhi, m.Y)
		}
	}
	xs := newScale(l.X, xlo, xhi, false, plotL, plotR)
	ys := newScale(l.Y, ylo, yhi, true, plotB, plotT)
	names := make([]string, len(l.Series))
	for i, s := range l.Series {
		names[i] = s.Name
	}
	var c canvas
	c.open(l.Title, height(names))
	c.yAxis(l.Y, ys)
	for _, v := range xs.ticks {
		x := xs.at(v)
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>`+"\n", f(x), f(plotB), f(x), f(plotB+4))
		c.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", f(x), f(plotB+16), esc(Num(v, l.X.Percent)))
	}
	c.xLabel(l.X.Label)
	c.marks(l.Marks, ys)
	if empty {
		c.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#555555">no data</text>`+"\n", f((plotL+plotR)/2), f((plotT+plotB)/2))
	}
	for k, s := range l.Series {
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				c.printf(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colour(k))
			}
			pts = pts[:0]
		}
		n := min(len(s.X), len(s.Y))
		for i := range n {
			x, y := s.X[i], s.Y[i]
			if !xs.ok(x) || !ys.ok(y) {
				flush()
				continue
			}
			pts = append(pts, f(xs.at(x))+","+f(ys.at(min(max(y, ys.lo), ys.hi))))
		}
		flush()
		// A dot per point with its values as a hover title (a lone point
		// between gaps shows as its dot).
		for i := range n {
			x, y := s.X[i], s.Y[i]
			if !xs.ok(x) || !ys.ok(y) {
				continue
			}
			c.printf(`<circle cx="%s" cy="%s" r="2.5" fill="%s"><title>%s</title></circle>`+"\n",
				f(xs.at(x)), f(ys.at(min(max(y, ys.lo), ys.hi))), colour(k),
				esc(fmt.Sprintf("%s: %s = %s, %s = %s", s.Name, l.X.Label, Num(x, l.X.Percent), l.Y.Label, Num(y, l.Y.Percent))))
		}
	}
	c.legend(names, nil)
	return c.close()
}

// SVG draws the bar chart.
func (b Bars) SVG() string {
	lo, hi := math.Inf(1), math.Inf(-1)
	ys0 := scale{log: b.Y.Log}
	for i := range b.Categories {
		var pos, neg float64
		for _, g := range b.Groups {
			if i >= len(g.Values) || !ys0.ok(g.Values[i]) {
				continue
			}
			v := g.Values[i]
			if b.Stacked {
				if v >= 0 {
					pos += v
				} else {
					neg += v
				}
				lo, hi = math.Min(lo, neg), math.Max(hi, pos)
			} else {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	empty := math.IsInf(lo, 1)
	if empty {
		lo, hi = 0, 1
	}
	for _, m := range b.Marks {
		if ys0.ok(m.Y) && b.Y.Max <= 0 {
			lo, hi = math.Min(lo, m.Y), math.Max(hi, m.Y)
		}
	}
	ys := newScale(b.Y, lo, hi, true, plotB, plotT)
	names := make([]string, len(b.Groups))
	for i, g := range b.Groups {
		names[i] = g.Name
	}
	var c canvas
	c.open(b.Title, height(names))
	c.yAxis(b.Y, ys)
	c.xLabel(b.XLabel)
	n := max(1, len(b.Categories))
	band := (plotR - plotL) / float64(n)
	// Label every k-th category, k the smallest that leaves room for
	// labels of up to 8 characters; a longer label is cut, its whole text
	// in the bars' titles.
	room := band
	every := 1
	for maxLen := 0; ; {
		for _, cat := range b.Categories {
			maxLen = max(maxLen, len([]rune(cat)))
		}
		if charW*float64(min(maxLen, 8)) <= room || every >= n {
			break
		}
		every++
		room = band * float64(every)
	}
	fit := max(1, int(room/charW))
	base := ys.at(math.Max(ys.lo, math.Min(0, ys.hi)))
	if b.Y.Log {
		base = plotB
	}
	for i, cat := range b.Categories {
		x0 := plotL + band*float64(i)
		if i%every == 0 {
			label := []rune(cat)
			if len(label) > fit {
				label = append(label[:max(1, fit-1)], '…')
			}
			c.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", f(x0+band/2), f(plotB+16), esc(string(label)))
		}
		inner := band * 0.8
		bw := inner
		if !b.Stacked && len(b.Groups) > 0 {
			bw = inner / float64(len(b.Groups))
		}
		pos, neg := base, base
		for k, g := range b.Groups {
			if i >= len(g.Values) || !ys.ok(g.Values[i]) {
				continue
			}
			v := g.Values[i]
			x := x0 + band*0.1
			var top, bottom float64
			switch {
			case b.Stacked && v >= 0:
				bottom = pos
				top = ys.at(math.Min(ys.hi, ys.val(pos)+v))
				pos = top
			case b.Stacked:
				top = neg
				bottom = ys.at(math.Max(ys.lo, ys.val(neg)+v))
				neg = bottom
			default:
				x += bw * float64(k)
				y := ys.at(math.Min(ys.hi, math.Max(ys.lo, v)))
				top, bottom = math.Min(y, base), math.Max(y, base)
			}
			c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
				f(x), f(top), f(math.Max(bw-1, 0.5)), f(bottom-top), colour(k),
				esc(fmt.Sprintf("%s, %s: %s", cat, g.Name, Num(v, b.Y.Percent))))
		}
	}
	c.marks(b.Marks, ys)
	if empty {
		c.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#555555">no data</text>`+"\n", f((plotL+plotR)/2), f((plotT+plotB)/2))
	}
	c.legend(names, nil)
	return c.close()
}

// val is the inverse of at: the data value at a coordinate (linear axes).
func (s scale) val(y float64) float64 {
	return s.lo + (s.hi-s.lo)*(y-s.from)/(s.to-s.from)
}

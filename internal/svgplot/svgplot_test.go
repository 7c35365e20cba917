package svgplot

import (
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

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

// axis reads "x=(label)" style arguments: LABEL, and xlog, xpercent, xmax=.
func axis(t *testing.T, td *datadriven.TestData, p string) Axis {
	a := Axis{Log: td.HasArg(p + "log"), Percent: td.HasArg(p + "percent")}
	for _, arg := range td.CmdArgs {
		switch arg.Key {
		case p:
			a.Label = strings.Join(arg.Vals, ", ")
		case p + "max":
			a.Max = num(t, arg.Vals[0])
		}
	}
	return a
}

func marks(t *testing.T, td *datadriven.TestData) []Mark {
	var ms []Mark
	for _, arg := range td.CmdArgs {
		if arg.Key == "mark" {
			for _, v := range arg.Vals {
				label, y, _ := strings.Cut(v, "@")
				ms = append(ms, Mark{Label: label, Y: num(t, y)})
			}
		}
	}
	return ms
}

// TestPlots pins whole plots (testdata/plots.txt). A case is
//
//	line title=T x=LABEL y=LABEL [xlog] [ylog] [ypercent] [ymax=M] [mark=(label@y)]
//	NAME: x y, x y, ...
//
// or
//
//	bars title=T x=LABEL y=LABEL [stacked] [ypercent] [mark=(label@y)] categories=(a, b)
//	NAME: v v ...
//
// with one line per series or group ("-": no value).
func TestPlots(t *testing.T) {
	datadriven.RunTest(t, "testdata/plots.txt", func(t *testing.T, td *datadriven.TestData) string {
		var title string
		td.ScanArgs(t, "title", &title)
		switch td.Cmd {
		case "line":
			l := Line{Title: title, X: axis(t, td, "x"), Y: axis(t, td, "y"), Marks: marks(t, td)}
			for _, row := range strings.Split(td.Input, "\n") {
				name, pts, _ := strings.Cut(row, ":")
				s := Series{Name: name}
				for _, p := range strings.Split(pts, ",") {
					xy := strings.Fields(p)
					if len(xy) != 2 {
						td.Fatalf(t, "point %q", p)
					}
					s.X, s.Y = append(s.X, num(t, xy[0])), append(s.Y, num(t, xy[1]))
				}
				l.Series = append(l.Series, s)
			}
			return l.SVG()
		case "bars":
			b := Bars{Title: title, XLabel: axis(t, td, "x").Label, Y: axis(t, td, "y"), Stacked: td.HasArg("stacked"), Marks: marks(t, td)}
			for _, arg := range td.CmdArgs {
				if arg.Key == "categories" {
					b.Categories = arg.Vals
				}
			}
			for _, row := range strings.Split(td.Input, "\n") {
				name, vs, _ := strings.Cut(row, ":")
				g := Group{Name: name}
				for _, v := range strings.Fields(vs) {
					g.Values = append(g.Values, num(t, v))
				}
				b.Groups = append(b.Groups, g)
			}
			return b.SVG()
		}
		td.Fatalf(t, "unknown command %q", td.Cmd)
		return ""
	})
}

var (
	numRE  = regexp.MustCompile(`\s(?:x|y|x1|x2|y1|y2|cx|cy|width|height)="([^"]*)"`)
	ptsRE  = regexp.MustCompile(`points="([^"]*)"`)
	textRE = regexp.MustCompile(`<text x="([-0-9.]+)" y="([-0-9.]+)"`)
)

// TestSafeAndWellFormed: whatever the data and names, a plot is
// well-formed XML whose every text is escaped, with no style element or
// attribute and no script (so a page whose CSP forbids inline style and
// script shows it), no number that is not finite, and every text inside
// the drawing.
func TestSafeAndWellFormed(t *testing.T) {
	evil := `<script>alert("x")</script> & 'quote' ]]>` + "\x01"
	nan, inf := math.NaN(), math.Inf(1)
	plots := map[string]string{
		"line": Line{Title: evil, X: Axis{Label: evil}, Y: Axis{Label: evil, Percent: true}, Marks: []Mark{{Label: evil, Y: 0.5}, {Label: "off", Y: nan}},
			Series: []Series{{Name: evil, X: []float64{1, 2, 3, 4, 5}, Y: []float64{0.1, nan, 0.3, inf, -0.2}}, {Name: "b", X: []float64{nan}, Y: []float64{1}}}}.SVG(),
		"log": Line{Title: "log", X: Axis{Label: "n", Log: true}, Y: Axis{Label: "ms", Log: true},
			Series: []Series{{Name: "p99", X: []float64{0, 1000, 1e4, 1e6}, Y: []float64{1, 0.5, 2, -1}}}}.SVG(),
		"empty line": Line{Title: "none", Series: []Series{{Name: "a"}}}.SVG(),
		"bars": Bars{Title: evil, XLabel: evil, Categories: []string{evil, "b", "c"}, Y: Axis{Label: "USD"}, Marks: []Mark{{Label: evil, Y: 2}},
			Groups: []Group{{Name: evil, Values: []float64{1, nan, -2}}, {Name: "g", Values: []float64{inf}}}}.SVG(),
		"stacked": Bars{Title: "s", Categories: []string{"a", "b"}, Y: Axis{Label: "USD"}, Stacked: true,
			Groups: []Group{{Name: "x", Values: []float64{1, 2}}, {Name: "y", Values: []float64{3, -1}}}}.SVG(),
		"empty bars": Bars{Title: "none"}.SVG(),
	}
	for name, svg := range plots {
		t.Run(name, func(t *testing.T) {
			dec := xml.NewDecoder(strings.NewReader(svg))
			for {
				tok, err := dec.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("not well-formed XML: %v\n%s", err, svg)
				}
				if el, ok := tok.(xml.StartElement); ok {
					if el.Name.Local == "style" || el.Name.Local == "script" || el.Name.Local == "foreignObject" {
						t.Errorf("element %s", el.Name.Local)
					}
					for _, a := range el.Attr {
						if a.Name.Local == "style" || strings.HasPrefix(a.Name.Local, "on") || a.Name.Local == "href" {
							t.Errorf("attribute %s on %s", a.Name.Local, el.Name.Local)
						}
					}
				}
			}
			if strings.Contains(svg, "<script>") || strings.Contains(svg, "\x01") {
				t.Error("text not escaped")
			}
			if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
				t.Errorf("a number that is not finite:\n%s", svg)
			}
			var nums []string
			for _, m := range numRE.FindAllStringSubmatch(svg, -1) {
				nums = append(nums, m[1])
			}
			for _, m := range ptsRE.FindAllStringSubmatch(svg, -1) {
				for _, p := range strings.Fields(m[1]) {
					x, y, _ := strings.Cut(p, ",")
					nums = append(nums, x, y)
				}
			}
			for _, s := range nums {
				if v, err := strconv.ParseFloat(s, 64); err != nil || v < -1 || v > 1000 {
					t.Errorf("coordinate %q outside the drawing", s)
				}
			}
			for _, m := range textRE.FindAllStringSubmatch(svg, -1) {
				if x, y := num(t, m[1]), num(t, m[2]); x < 0 || x > width || y < 0 || y > 400 {
					t.Errorf("text at %v,%v outside the drawing", x, y)
				}
			}
		})
	}
}

// TestTicks: axis ticks are round values that cover the data, from zero on
// linear y axes, powers of ten on log axes, and a fixed top is the top.
func TestTicks(t *testing.T) {
	for _, c := range []struct {
		a      Axis
		lo, hi float64
		zero   bool
		want   string
	}{
		{Axis{}, 0, 0.93, true, "0 0.25 0.5 0.75 1"},
		{Axis{Max: 1, Percent: true}, 0, 0.4, true, "0 0.25 0.5 0.75 1"},
		{Axis{}, 10, 330, false, "0 100 200 300 400"},
		{Axis{}, 3, 7, true, "0 2 4 6 8"},
		{Axis{}, -2, 3, true, "-2 0 2 4"},
		{Axis{Log: true}, 1000, 1e6, false, "1000 10000 100000 1e+06"},
		{Axis{Log: true}, 0.3, 2, false, "0.1 1 10"},
		{Axis{}, 0, 0, true, "0 0.25 0.5 0.75 1"},
	} {
		s := newScale(c.a, c.lo, c.hi, c.zero, 0, 100)
		var got []string
		for _, v := range s.ticks {
			got = append(got, strconv.FormatFloat(v, 'g', -1, 64))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%+v [%v, %v]: %v, want %s", c.a, c.lo, c.hi, got, c.want)
		}
	}
	for v, want := range map[float64]string{0: "0", 1500: "1.5k", 1e6: "1M", 2.5e9: "2.5G", 0.0125: "0.0125", 123456: "123.5k", -3000: "-3k"} {
		if got := Num(v, false); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
	if got := Num(0.953, true); got != "95.3%" {
		t.Errorf("Num(0.953, percent) = %q", got)
	}
}

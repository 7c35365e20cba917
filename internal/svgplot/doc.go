// Package svgplot draws the bench report's plots as SVG: line plots over a
// numeric x axis (linear or logarithmic, either axis) and grouped bar
// charts (histograms are bars over bins). It is a pure function of its
// input, with no dependency beyond the standard library, so that
// `sigctl report` writes the same bytes for the same bench files and the
// operator web UI (sigd/ui) can embed the very same drawing.
//
// What makes a plot safe to embed and readable:
//
//   - every piece of text (titles, names, labels) is XML-escaped; only
//     numbers this package formats go into attributes unescaped;
//   - styling is SVG presentation attributes only (fill, stroke, font-size):
//     no <style> element, no style attribute, no script, so a page whose CSP
//     allows no inline style or script shows it as a standalone file does;
//   - a fixed viewBox (text is never stretched), ticks at round values
//     chosen from the data, the axes' quantities named, a legend under the
//     plot (never over the data), a hover title on every point and bar;
//   - reference marks: a dashed horizontal line at a named value (the
//     paper's figure, a target) so that a plot sits next to what it
//     mirrors;
//   - values that are not finite are gaps (lines) or absent bars, never NaN
//     in the markup.
//
// testdata/plots.txt pins whole plots (datadriven; `go test
// ./internal/svgplot -rewrite` regenerates it for review).
//
// What the package does not own: what is plotted and whether it is measured
// or modelled (package report), and the UI's own time-series charts
// (sigd/ui/chart.go, which draws live samples with the console's
// stylesheet).
package svgplot

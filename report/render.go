package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sigdata/sig/internal/figure"
)

const intro = "Each plot sits next to the paper's figure or number it mirrors and is marked **measured** (counted on this system's running code) " +
	"or **modelled** (a model decides it: its constants, with their sources, are listed beside it, and the tables below each section sweep the deciding ones). " +
	"A section whose input is missing says which command writes it."

// Markdown returns the report as Markdown; its plots are images at
// svgDir/NAME.svg (relative to the Markdown file).
func (r *Report) Markdown(svgDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# SIG bench report\n\nWritten by `sigctl report --bench %s` from the bench files in `%s/`. %s\n\n", r.Dir, r.Dir, intro)
	for _, s := range r.Sections {
		status := "`" + r.Dir + "/" + s.File + "`"
		if s.Missing != "" {
			status += ", not run"
		}
		fmt.Fprintf(&b, "- [%s](#%s) (%s)\n", s.Title, s.ID, status)
	}
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n<a id=\"%s\"></a>\n\n## %s\n\n", s.ID, s.Title)
		if s.Missing != "" {
			fmt.Fprintf(&b, "%s\n", md(s.Missing))
			continue
		}
		for _, it := range s.Items {
			switch {
			case it.Plot != nil:
				p := it.Plot
				fmt.Fprintf(&b, "### %s\n\n**%s**", md(p.Title), p.Kind)
				if p.Paper != "" {
					fmt.Fprintf(&b, " · mirrors %s", md(p.Paper))
				}
				fmt.Fprintf(&b, "\n\n![%s](%s/%s.svg)\n\n%s\n\n", md(p.Title), svgDir, p.Name, md(p.Caption))
			case it.Table != nil:
				t := it.Table
				fmt.Fprintf(&b, "%s:\n\n| %s |\n|%s\n", md(t.Caption), cells(t.Header), strings.Repeat(" --- |", len(t.Header)))
				for _, row := range t.Rows {
					fmt.Fprintf(&b, "| %s |\n", cells(row))
				}
				b.WriteString("\n")
			default:
				fmt.Fprintf(&b, "%s\n\n", md(it.Text))
			}
		}
	}
	return b.String()
}

func cells(row []string) string {
	out := make([]string, len(row))
	for i, c := range row {
		out[i] = strings.NewReplacer("|", `\|`, "\n", " ").Replace(md(c))
	}
	return strings.Join(out, " | ")
}

// md escapes the characters that would make HTML in Markdown: the inputs'
// text (a check's detail, a pipeline's name) is text, not markup.
var md = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// WriteFiles writes the report to mdPath and its plots to report/ beside
// it (NAME.svg), removing the SVG files there that the report no longer
// has.
func (r *Report) WriteFiles(mdPath string) error {
	svgDir := filepath.Join(filepath.Dir(mdPath), "report")
	if err := os.MkdirAll(svgDir, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, p := range r.Plots() {
		keep[p.Name+".svg"] = true
		if err := os.WriteFile(filepath.Join(svgDir, p.Name+".svg"), []byte(p.SVG), 0o644); err != nil {
			return err
		}
	}
	old, err := filepath.Glob(filepath.Join(svgDir, "*.svg"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if !keep[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(mdPath, []byte(r.Markdown("report")), 0o644)
}

//go:embed report.html
var htmlTemplate string

var (
	codeRE   = regexp.MustCompile("`([^`]+)`")
	strongRE = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// inline escapes Markdown inline text for HTML, then turns `code` and
// **bold** into elements (after escaping, so no input makes markup).
func inline(s string) template.HTML {
	e := template.HTMLEscapeString(s)
	e = codeRE.ReplaceAllString(e, "<code>$1</code>")
	e = strongRE.ReplaceAllString(e, "<strong>$1</strong>")
	return template.HTML(e)
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"inline": inline,
	// svg marks a plot's markup safe: svgplot made it and escaped every
	// text in it (TestSafeAndWellFormed in internal/svgplot).
	"svg":      func(s string) template.HTML { return template.HTML(s) },
	"modelled": func(k figure.Kind) bool { return k == figure.Modelled },
}).Parse(htmlTemplate))

// HTML returns the report as an HTML fragment (for the operator web UI):
// the same sections, tables and plots, the SVG inline.
func (r *Report) HTML() (template.HTML, error) {
	var b bytes.Buffer
	if err := htmlTmpl.Execute(&b, r); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil
}

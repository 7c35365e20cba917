package ui

import (
	"html/template"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	"github.com/sigdata/sig/report"
)

// reports.go serves the bench reports (package report) of
// Config.ReportsDir: /ui/reports lists them, /ui/reports/{name} shows one,
// made from its JSON files when asked, so the page always shows the files
// as they are. The report's HTML is package report's: the same plots as
// `sigctl report`'s Markdown, with every text of the inputs escaped.

// reportEntry is one report: a directory holding bench JSON files.
type reportEntry struct {
	Name string // the directory's base name: the URL's {name}
	Dir  string
}

// reportEntries lists the reports of root: root itself, if it holds bench
// files, and each subdirectory that does, by name. A subdirectory named as
// root is shadowed by root.
func reportEntries(root string) ([]reportEntry, error) {
	if root == "" {
		return nil, nil
	}
	var out []reportEntry
	seen := map[string]bool{}
	if report.HasInputs(root) {
		name := filepath.Base(filepath.Clean(root))
		out = append(out, reportEntry{Name: name, Dir: root})
		seen[name] = true
	}
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var subs []reportEntry
	for _, de := range des {
		dir := filepath.Join(root, de.Name())
		if de.IsDir() && !seen[de.Name()] && report.HasInputs(dir) {
			subs = append(subs, reportEntry{Name: de.Name(), Dir: dir})
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name < subs[j].Name })
	return append(out, subs...), nil
}

type reportsData struct {
	Dir     string
	Reports []reportEntry
}

func (u *UI) reports(w http.ResponseWriter, r *http.Request, s *session) {
	p := u.base(s, "Reports")
	es, err := reportEntries(u.cfg.ReportsDir)
	if err != nil {
		p.Error = err.Error()
	}
	p.Data = reportsData{Dir: u.cfg.ReportsDir, Reports: es}
	u.render(w, http.StatusOK, "reports", p)
}

type reportData struct {
	Name string
	HTML template.HTML
}

// reportPage shows the report named in the URL. The name is looked up
// among the listed reports, never joined to a path: no URL reaches a
// directory the list does not show.
func (u *UI) reportPage(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	es, err := reportEntries(u.cfg.ReportsDir)
	if err != nil {
		u.render(w, http.StatusInternalServerError, "error", u.base(s, "Reports: "+err.Error()))
		return
	}
	for _, e := range es {
		if e.Name != name {
			continue
		}
		p := u.base(s, "Report "+name)
		rep, err := report.Build(e.Dir)
		if err != nil {
			// A malformed input names its file and field.
			p.Error = "This report's inputs are malformed: " + err.Error()
			p.Data = reportData{Name: name}
			u.render(w, http.StatusUnprocessableEntity, "report", p)
			return
		}
		rep.Dir = name
		h, err := rep.HTML()
		if err != nil {
			u.render(w, http.StatusInternalServerError, "error", u.base(s, "Report: "+err.Error()))
			return
		}
		p.Data = reportData{Name: name, HTML: h}
		u.render(w, http.StatusOK, "report", p)
		return
	}
	u.render(w, http.StatusNotFound, "error", u.base(s, "No such report"))
}

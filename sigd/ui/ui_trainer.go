package ui

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sigdata/sig/internal/svgplot"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// The trainer page (issue 30): why a job waits. Its stall by cause, as
// the trainer reported it (TrainerStatus.stall, the ledger of
// trainer/accounting/stall), a chart and a table; what its pipeline's
// pending entries wait on now (ExplainPending); and the operator's
// action, raising the pipeline's priority as set-priority does.

type trainerPage struct {
	Status *sigv1.TrainerStatus
	Stall  []*sigv1.StallCause
	Chart  template.HTML
	// Pending is sigd's answer now about the pipeline's entries.
	Pending     *sigv1.ExplainPendingResponse
	PendingErr  string
	StallString string
}

func (u *UI) trainer(w http.ResponseWriter, r *http.Request, s *session) {
	client, job := r.PathValue("client"), r.PathValue("job")
	var st *sigv1.TrainerStatus
	if u.cfg.Trainers != nil {
		for _, t := range u.cfg.Trainers() {
			if t.GetClient() == client && t.GetJob() == job {
				st = t
			}
		}
	}
	if st == nil {
		u.render(w, http.StatusNotFound, "error", u.base(s, "No trainer "+client+"/"+job+" has reported"))
		return
	}
	p := u.base(s, "Trainer "+client+"/"+job)
	p.Refresh = 10
	d := trainerPage{Status: st, Stall: st.GetStall(),
		StallString: (time.Duration(st.GetInputStallSeconds() * float64(time.Second))).Round(time.Millisecond).String()}
	if len(d.Stall) > 0 {
		d.Chart = stallChart(d.Stall)
	}
	if u.cfg.Explain != nil && st.GetPipeline() != "" {
		d.Pending, _ = u.cfg.Explain(client, st.GetPipeline())
		if d.Pending == nil {
			d.PendingErr = "sigd could not say (the pipeline is not registered?)"
		}
	}
	// The notice after setPriority's redirect: numbers only, so that a
	// crafted link shows no text of its own (it can still claim a move
	// that did not happen, as any GET can; the server log has the truth).
	q := r.URL.Query()
	if moved, err := strconv.Atoi(q.Get("moved")); err == nil && moved >= 0 {
		if prio, err := strconv.ParseInt(q.Get("priority"), 10, 32); err == nil {
			p.Notice = fmt.Sprintf("Priority set to %d: %d queued tasks moved.", prio, moved)
		}
	}
	p.Data = d
	u.render(w, http.StatusOK, "trainer", p)
}

// stallChart draws the stall by cause kind (seconds), one bar each.
func stallChart(lines []*sigv1.StallCause) template.HTML {
	by := map[string]float64{}
	var kinds []string
	for _, l := range lines {
		if _, ok := by[l.GetKind()]; !ok {
			kinds = append(kinds, l.GetKind())
		}
		by[l.GetKind()] += l.GetSeconds()
	}
	vals := make([]float64, len(kinds))
	for i, k := range kinds {
		vals[i] = by[k]
	}
	// svgplot escapes every text it draws.
	return template.HTML(svgplot.Bars{Title: "Input stall by cause", XLabel: "cause", Categories: kinds,
		Y: svgplot.Axis{Label: "seconds"}, Groups: []svgplot.Group{{Name: "stall", Values: vals}}}.SVG())
}

// setPriority raises (or lowers) a pipeline's priority and its queued
// work, as `sigctl set-priority` does: operators only, CSRF-checked by
// operator(), logged under the operator's name.
func (u *UI) setPriority(w http.ResponseWriter, r *http.Request, s *session) {
	client, pipeline, job := r.PostFormValue("client"), r.PostFormValue("pipeline"), r.PostFormValue("job")
	prio, err := strconv.ParseInt(r.PostFormValue("priority"), 10, 32)
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Bad request: priority: not a number"))
		return
	}
	if u.cfg.SetPriority == nil {
		u.render(w, http.StatusNotFound, "error", u.base(s, "Setting priorities is not available"))
		return
	}
	moved, err := u.cfg.SetPriority(s.p.Name, client, pipeline, int32(prio))
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Setting the priority failed: "+err.Error()))
		return
	}
	u.cfg.Log.Info("ui: set priority", "who", s.p.Name, "client", client, "pipeline", pipeline, "priority", prio, "moved", moved)
	to := "/ui/"
	if job != "" {
		to = "/ui/trainer/" + url.PathEscape(client) + "/" + url.PathEscape(job)
	}
	http.Redirect(w, r, to+"?"+url.Values{"moved": {strconv.Itoa(moved)}, "priority": {strconv.FormatInt(prio, 10)}}.Encode(), http.StatusSeeOther)
}

package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/warehouse/blockref"
)

// block evicts or recomputes one block from its component's page
// (EvictBlock, RecomputeBlock), with the operator's name and reason in
// the audit log, and goes back to the page, which shows the block gone or
// pending.
func (u *UI) block(w http.ResponseWriter, r *http.Request, s *session) {
	k, err := canon.ParseKey(r.PostFormValue("component"))
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Bad request: component: "+err.Error()))
		return
	}
	id, reason := blockref.ParseMemo(r.PostFormValue("block")), strings.TrimSpace(r.PostFormValue("reason"))
	var im eviction.BlockImpact
	switch action := r.PostFormValue("action"); action {
	case "evict":
		im, err = u.cfg.Evictor.EvictBlock(r.Context(), k, id, s.p.Name, reason)
	case "recompute":
		im, err = u.cfg.Evictor.RecomputeBlock(r.Context(), k, id, s.p.Name, reason)
	default:
		err = fmt.Errorf("action %q: want evict or recompute", action)
	}
	if err != nil {
		u.render(w, http.StatusBadRequest, "error", u.base(s, "Block "+id.String()+": "+err.Error()))
		return
	}
	u.cfg.Log.Info("ui: block", "who", s.p.Name, "action", r.PostFormValue("action"), "component", k.String(), "block", id, "audit_id", im.AuditID)
	http.Redirect(w, r, "/ui/component/"+url.PathEscape(k.String()), http.StatusSeeOther)
}

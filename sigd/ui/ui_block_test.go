package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestUIBlockActions: an operator recomputes one block and evicts another
// from the component page; each needs a reason, is audited under the
// operator's name, and leaves the other blocks and components alone.
func TestUIBlockActions(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{Blocks: 2, Rows: 50})
	e.Pipelines()
	k := sigdtest.InputKey(t, e.Solution("ctr", "ctr-small"), "price_bin")
	other := sigdtest.InputKey(t, e.Solution("ctr", "ctr-small"), "query_ids")
	b0, b1 := e.Blocks[0].ID, e.Blocks[1].ID
	b := newBrowser(t, e)
	csrf := b.operator(e)
	_, page := b.get("/ui/component/" + k.String())
	if !strings.Contains(page, `action="/ui/block"`) || !strings.Contains(page, `value="`+b1+`"`) {
		t.Fatalf("the component page has no block forms:\n%s", page)
	}
	// Each ready block's pack and its column there (issue 28).
	for _, id := range []string{b0, b1} {
		m, err := e.Srv.Frontend().Cache().Memo(k, blockref.ParseMemo(id))
		if err != nil || !m.Packed() {
			t.Fatalf("entry of block %s: %+v, %v; want it in a pack", id, m, err)
		}
		if !strings.Contains(page, m.Object) || !strings.Contains(page, `title="`+m.Column+`">column `+m.Column[:12]) {
			t.Errorf("the component page does not show block %s's pack %s and column %s", id, m.Object, m.Column)
		}
	}
	form := func(block, action, reason string) url.Values {
		return url.Values{"csrf": {csrf}, "component": {k.String()}, "block": {block}, "action": {action}, "reason": {reason}}
	}
	for _, f := range []url.Values{form(b0, "evict", " "), form(b0, "recompute", ""), form(b0, "drop", "r"), form("../x", "evict", "r")} {
		if resp, _ := b.post("/ui/block", f); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST /ui/block %v: %s, want 400", f, resp.Status)
		}
	}
	e.CheckMemoized(k)

	resp, _ := b.post("/ui/block", form(b0, "recompute", "suspect run"))
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/component/"+k.String() {
		t.Fatalf("recompute: %s at %s", resp.Status, resp.Request.URL)
	}
	resp, _ = b.post("/ui/block", form(b1, "evict", "bad disk"))
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/component/"+k.String() {
		t.Fatalf("evict: %s at %s", resp.Status, resp.Request.URL)
	}
	if _, err := e.Srv.Frontend().Cache().Memo(k, blockref.ParseMemo(b1)); err == nil {
		t.Errorf("evicted block %s still has an entry", b1)
	}
	a, err := e.SIG(evictiontest.Operator).ListAudit(e.Ctx, &sigv1.ListAuditRequest{})
	if err != nil || len(a.Entries) != 2 {
		t.Fatalf("audit: %v %v", a, err)
	}
	if ev, rc := a.Entries[0], a.Entries[1]; ev.Who != evictiontest.Operator || ev.Why != "bad disk" || !strings.Contains(ev.What, b1) ||
		rc.Who != evictiontest.Operator || rc.Why != "suspect run" || !strings.Contains(rc.What, "recompute block "+b0) {
		t.Errorf("audit entries %v", a.Entries)
	}
	e.CheckMemoized(other)
	e.WaitComplete("ctr", "ctr-small")
	e.CheckMemoized(k)
	if m, err := e.Srv.Frontend().Cache().Memo(k, blockref.ParseMemo(b0)); err != nil || m.State != matching.MemoReady {
		t.Errorf("recomputed block: %+v %v", m, err)
	}
}

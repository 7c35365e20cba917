package ui_test

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
)

// holdRunner holds memoization runs while held.
type holdRunner struct {
	inner workers.Runner
	mu    sync.Mutex
	held  chan struct{} // nil: runs go through
}

func (h *holdRunner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
			return workers.Result{}, ctx.Err()
		}
	}
	return h.inner.Run(ctx, t)
}

// TestUIShowsGuardMismatch: a memo object whose values are wrong (every
// row holds the next row's value, written through the memo writer) is
// reported by a reader's guard (reason MEMO_MISMATCH); once sigd has
// confirmed and quarantined it, the component page shows the block
// pending with the quarantine's reason and the first differing row, and
// the component's count of mismatches, and the audit log the quarantine.
// Before, the page had no mismatch count and a report of this reason was
// checked as a corrupt object only (healthy: nothing shown).
func TestUIShowsGuardMismatch(t *testing.T) {
	h := &holdRunner{}
	e := evictiontest.New(t, evictiontest.Config{Blocks: 2, Rows: 50, WrapRunner: func(r workers.Runner) workers.Runner {
		h.inner = r
		return h
	}})
	e.Pipelines()
	k := sigdtest.InputKey(t, e.Solution("ctr", "ctr-small"), "query_ids")
	b0 := e.Blocks[0].ID
	m, err := e.Srv.Frontend().Cache().Memo(k, blockref.ParseMemo(b0))
	if err != nil {
		t.Fatal(err)
	}
	// The faulty worker's column (in its pack, issue 28).
	if _, err := sigdtest.RewriteMemo(e.Ctx, e.Srv.Store(), m.Object, m.Column, sigdtest.Rotate); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, e)
	b.operator(e)
	if _, page := b.get("/ui/component/" + k.String()); !strings.Contains(page, "none since sigd started") {
		t.Fatalf("before any report, the component page shows no mismatch count:\n%s", page)
	}
	h.mu.Lock()
	h.held = make(chan struct{}) // hold the recomputation, to see the quarantine
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		close(h.held)
		h.held = nil
		h.mu.Unlock()
	}()
	resp, err := e.SIG("reader").ReportCorruptMemo(e.Ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: k.String(), BlockId: b0,
		Reason: "MEMO_MISMATCH", Detail: "memo mismatch: row 3 differs"})
	if err != nil || !resp.Corrupt {
		t.Fatalf("report: %v %v, want the mismatch confirmed", resp, err)
	}
	_, page := b.get("/ui/component/" + k.String())
	for _, want := range []string{`<td class="state-pending">pending</td>`, "quarantined (MEMO_MISMATCH)", "holds wrong values: row ",
		`<span class="state-failed">1 quarantined since sigd started</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the component page does not show %q:\n%s", want, page)
		}
	}
	if _, page := b.get("/ui/audit"); !strings.Contains(page, "quarantine mismatching block "+b0) || !strings.Contains(page, "memo mismatch: row 3 differs") {
		t.Errorf("the audit page does not show the quarantine:\n%s", page)
	}
}

// TestUIShowsBannedBuild (issue 27): the overview lists the worker builds
// banned for computing wrong values, with the reason, escaped (a build is
// what a worker says it runs), and a Lift button that only a POST with
// the session's CSRF token acts on; lifting lets the build lease again
// and is audited under the operator's name. The component page shows
// which build computed each block. Before, a wrong build could not be
// seen, stopped or let go anywhere.
func TestUIShowsBannedBuild(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{Blocks: 2, Rows: 50})
	e.Pipelines()
	k := sigdtest.InputKey(t, e.Solution("ctr", "ctr-small"), "query_ids")
	const hostile = "<script>alert(1)</script>"
	built := workers.BuildID() // the in-process workers'
	for _, b := range []string{built, hostile} {
		if _, _, err := e.Srv.Queue().BanBuild(b, "it computed block b0 of component "+k.Short()+" wrong twice in a row"); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, e)
	csrf := b.operator(e)
	_, page := b.get("/ui/")
	for _, want := range []string{`id="banned-builds">2<`, "Banned worker builds", "wrong twice in a row", `action="/ui/builds/lift"`, template.HTMLEscapeString(built)} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview does not show %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, hostile) || !strings.Contains(page, template.HTMLEscapeString(hostile)) {
		t.Errorf("the hostile build name is not escaped:\n%s", page)
	}
	if _, page := b.get("/ui/component/" + k.String()); !strings.Contains(page, `<td class="mono build">`+template.HTMLEscapeString(built)+`</td>`) {
		t.Errorf("the component page does not show the build that computed its blocks (%q):\n%s", built, page)
	}

	if resp, _ := b.post("/ui/builds/lift", url.Values{"build": {built}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a lift without the CSRF token: %s, want 403", resp.Status)
	}
	if _, banned := e.Srv.Queue().Banned(built); !banned {
		t.Fatal("a lift without the CSRF token lifted the ban")
	}
	resp, page := b.post("/ui/builds/lift", url.Values{"csrf": {csrf}, "build": {built}})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || resp.Request.URL.Query().Get("lifted") != "true" {
		t.Fatalf("lift: %s at %s", resp.Status, resp.Request.URL)
	}
	if _, banned := e.Srv.Queue().Banned(built); banned {
		t.Error("still banned after the lift")
	}
	if !strings.Contains(page, `id="banned-builds">1<`) {
		t.Errorf("the overview after the lift does not count one ban:\n%s", page)
	}
	if _, page := b.get("/ui/audit"); !strings.Contains(page, "lift the ban of worker build") || !strings.Contains(page, template.HTMLEscapeString(built)) {
		t.Errorf("the audit page does not show the lift:\n%s", page)
	}
}

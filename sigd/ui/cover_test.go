package ui_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestUIMemoNodeServes: the page of a memo node two models' covers share
// (issue 20) lists both pipelines it serves, though neither has it as a
// model input's component.
func TestUIMemoNodeServes(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{Rows: 5000, Blocks: 1, Insertion: sigd.InsertionCost})
	for _, s := range []struct{ client, pipeline, dsl string }{
		{"cvr", "t3", `input q3 = truncate(unigrams(lower(col("query"))), max=3)`},
		{"explore", "t5", `input q5 = truncate(unigrams(lower(col("query"))), max=5)`},
		{"cvr", "t3", `input q3 = truncate(unigrams(lower(col("query"))), max=3)`},
	} {
		if _, err := e.SIG(s.client).SubmitGraph(e.Ctx, sigdtest.Submit(s.client, s.pipeline, 0, s.dsl, e.All())); err != nil {
			t.Fatal(err)
		}
	}
	sol := e.WaitComplete("cvr", "t3")
	in := sol.GetInputs()[0]
	if !in.GetComputed() || len(in.GetMemoNodes()) != 1 {
		t.Fatalf("q3: %v, want computed over one memo node", in)
	}
	node := in.GetMemoNodes()[0].GetKey()
	b := newBrowser(t, e)
	b.operator(e)
	resp, page := b.get("/ui/component/" + node)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("memo node page: %s", resp.Status)
	}
	m := regexp.MustCompile(`(?s)id="pipelines">(.*?)</td>`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(m[1], "cvr / t3") || !strings.Contains(m[1], "explore / t5") || !strings.Contains(page, "Serves pipelines") {
		t.Fatalf("memo node %s's page does not list both pipelines it serves:\n%s", node[:12], page)
	}
}

package matching

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestReuse runs testdata/reuse.txt: pipelines submitted over event ranges,
// memo entries completed, and Reuse's count of the pipelines using each
// ready block, checked against the ranges (a block counts a pipeline only
// if the pipeline's read solution names it).
//
//	blocks n=N                   N raw blocks of 100 event-time units each
//	submit client=C pipeline=P from=F to=T
//	<DSL>                        registers (or re-registers) a pipeline
//	complete [blocks=b000,b001]  marks the pending entries (of those blocks) ready
//	reuse                        Reuse's summary and, per ready block, its users
func TestReuse(t *testing.T) {
	var f *Frontend
	datadriven.RunTest(t, "testdata/reuse.txt", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "blocks":
			var n int
			td.ScanArgs(t, "n", &n)
			f, _, _ = newTestFrontend(t, n)
			return ""
		case "submit":
			var client, pipeline string
			var from, to int64
			td.ScanArgs(t, "client", &client)
			td.ScanArgs(t, "pipeline", &pipeline)
			td.ScanArgs(t, "from", &from)
			td.ScanArgs(t, "to", &to)
			res, err := f.Submit(SubmitRequest{Client: client, Pipeline: pipeline, Graph: mustParse(t, td.Input), From: from, To: to})
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("components %d (hits %d), blocks %d (hits %d)",
				res.Components, res.ComponentHits, res.BlockHits+res.BlockMisses, res.BlockHits)
		case "complete":
			var only []string
			if td.HasArg("blocks") {
				td.ScanArgs(t, "blocks", &only)
			}
			keys, err := f.Cache().ComponentKeys()
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, k := range keys {
				memos, err := f.Cache().Memos(k)
				if err != nil {
					t.Fatal(err)
				}
				for id, e := range memos {
					if e.State != MemoPending || (only != nil && !slices.Contains(only, id)) {
						continue
					}
					if err := f.MarkReady(k, id, e.Gen, 100, 1000); err != nil {
						t.Fatal(err)
					}
					n++
				}
			}
			return fmt.Sprintf("%d entries ready", n)
		case "reuse":
			r, err := f.Reuse()
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "pipelines %d, components %d, ready %d, pending %d\n", r.Pipelines, r.Components, r.ReadyBlocks, r.PendingBlocks)
			fmt.Fprintf(&b, "pipelines per ready block: mean %.3f, max %d, blocks by pipelines %v\n",
				r.PipelinesPerBlockMean, r.PipelinesPerBlockMax, r.BlocksByPipelines)
			// Per ready block, the count Reuse aggregates: the block, its
			// users, the component's canonical DSL.
			_, uses, err := f.Cache().blockUsers(f.cfg.Blocks)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := f.Cache().ComponentKeys()
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, k := range keys {
				rec, err := f.Cache().Component(k)
				if err != nil {
					t.Fatal(err)
				}
				memos, err := f.Cache().Memos(k)
				if err != nil {
					t.Fatal(err)
				}
				for id, e := range memos {
					if e.State == MemoReady {
						lines = append(lines, fmt.Sprintf("%s used by %d: %s", id, uses[k][id], strings.TrimPrefix(rec.DSL, "input out = ")))
					}
				}
			}
			slices.Sort(lines)
			for _, l := range lines {
				fmt.Fprintf(&b, "%s\n", l)
			}
			return b.String()
		}
		td.Fatalf(t, "unknown command %q", td.Cmd)
		return ""
	})
}

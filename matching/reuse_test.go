package matching

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
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
					if e.State != MemoPending || (only != nil && !slices.Contains(only, id.String())) {
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
			_, uses, err := blockUsers(f.Cache(), f.cfg.Blocks)
			if err != nil {
				t.Fatal(err)
			}
			var hist []int64
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
						lines = append(lines, fmt.Sprintf("%s used by %d: %s", id, uses[k][id.String()], strings.TrimPrefix(rec.DSL, "input out = ")))
						for len(hist) <= uses[k][id.String()] {
							hist = append(hist, 0)
						}
						hist[uses[k][id.String()]]++
					}
				}
			}
			if !slices.Equal(hist, r.BlocksByPipelines) {
				t.Errorf("Reuse counts blocks by pipelines %v, the pipeline records %v", r.BlocksByPipelines, hist)
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

// TestReuseMemoryIsNotTheCache: Reuse's allocations do not grow with the
// components and memo entries it walks, only with the pipelines (their
// records and ranges). Reuse used to build a map of every component's users per block
// first: 4 GB of sigd's RSS at a million components (bench/scale.txt), on
// every Stats or /metrics scrape after a submit.
func TestReuseMemoryIsNotTheCache(t *testing.T) {
	f, _, _ := newTestFrontend(t, 4)
	graph := func(first, n int) string {
		var b strings.Builder
		for i := first; i < first+n; i++ {
			fmt.Fprintf(&b, "input c%d = hash(unigrams(lower(col(\"query\"))), buckets=%d)\n", i, 1000+i)
		}
		return b.String()
	}
	submit := func(pipeline string, first, n int) {
		t.Helper()
		if _, err := f.Submit(SubmitRequest{Client: "c", Pipeline: pipeline, Graph: mustParse(t, graph(first, n)), From: 0, To: 400}); err != nil {
			t.Fatal(err)
		}
		keys, err := f.Cache().ComponentKeys()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			memos, err := f.Cache().Memos(k)
			if err != nil {
				t.Fatal(err)
			}
			for id, e := range memos {
				if e.State == MemoPending {
					if err := f.MarkReady(k, id, e.Gen, 100, 1000); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	allocs := func() (float64, Reuse) {
		var r Reuse
		n := testing.AllocsPerRun(3, func() {
			var err error
			if r, err = f.Reuse(); err != nil {
				t.Fatal(err)
			}
		})
		return n, r
	}
	submit("a", 0, 20)
	submit("b", 20, 20)
	small, r := allocs()
	if r.Components != 40 || r.ReadyBlocks != 160 || r.PipelinesPerBlockMax != 1 {
		t.Fatalf("%+v", r)
	}
	// Ten times the components and memo entries, the pipelines as they
	// were: b used 400 components for a while, then its 20 again.
	submit("b", 20, 400)
	submit("b", 20, 20)
	large, r := allocs()
	if r.Components != 420 || r.ReadyBlocks != 1680 || r.Pipelines != 2 {
		t.Fatalf("%+v", r)
	}
	if large > small+50 {
		t.Errorf("Reuse allocates %.0f times over 40 components, %.0f over 420 (1680 ready blocks) of the same 2 pipelines: it grows with the cache", small, large)
	}
}

// blockUsers is the reference count TestReuse checks Reuse against, made
// from the pipeline records rather than the user index Reuse walks: per
// memo key and block, the registered pipelines whose read solution names
// the block for the key (uses[k][b]), and the number of pipelines.
func blockUsers(c *Cache, blocks Blocks) (int, map[canon.Key]map[string]int, error) {
	n := 0
	uses := map[canon.Key]map[string]int{}
	type span struct {
		source   string
		from, to int64
	}
	spans := map[span][]Block{} // ranges repeat across a fleet
	err := pebbleutil.Scan(c.db, pipelinePrefix(""), func(_, v []byte) (bool, error) {
		n++
		var p Pipeline
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		sp := span{p.Source, p.From, p.To}
		bs, ok := spans[sp]
		if !ok {
			var err error
			if bs, err = blocks.Range(p.Source, p.From, p.To); err != nil {
				return false, err
			}
			spans[sp] = bs
		}
		// Two inputs on one memo key: one user.
		for _, k := range p.memoKeys() {
			m := uses[k]
			if m == nil {
				m = map[string]int{}
				uses[k] = m
			}
			for _, b := range bs {
				m[b.Ref.ID()]++
			}
		}
		return true, nil
	})
	return n, uses, err
}

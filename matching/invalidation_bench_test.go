package matching

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	fleetgen "github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// invalidationChange is one kind of change to a sealed block (issue 21)
// and the columns whose values it makes new: a label update bumps the
// labels, a feature update its column, late rows and deletions the row set,
// so every column (memo objects stay row-aligned with their block).
type invalidationChange struct {
	name    string
	columns []string
}

func invalidationChanges(s *transform.Schema) []invalidationChange {
	var all, features []string
	for _, f := range s.Fields {
		all = append(all, f.Name)
		if f.Name != transform.ColEventID && f.Name != transform.ColEventTime && f.Name != "click" && f.Name != "conversion" {
			features = append(features, f.Name)
		}
	}
	out := []invalidationChange{{"label", []string{"click", "conversion"}}}
	for _, c := range features {
		out = append(out, invalidationChange{"feature:" + c, []string{c}})
	}
	return append(out, invalidationChange{"late-row", all}, invalidationChange{"delete", all})
}

// BenchmarkInvalidation measures what a change to one sealed block costs in
// memo tasks (bench/invalidation.sh): a fleet of the fleet generator
// (SIG_BENCH_PIPELINES pipelines, default 120; whole components memoized,
// the paper's policy) registered over one block per slot, every entry
// ready; then, for every block and every kind of change, a new version of
// the block and Frontend.BlockChanged: the tasks it schedules, against the
// components memoized over the block, which a memo keyed by block version
// (or a whole-block recompute) would all recompute. Each change is undone
// (its new entries deleted) before the next, so every figure is one change
// to a block whose entries are all ready. Reported per kind: tasks per
// changed block, all components per block, and BlockChanged's time.
func BenchmarkInvalidation(b *testing.B) {
	pipelines := 120
	if v, err := strconv.Atoi(os.Getenv("SIG_BENCH_PIPELINES")); err == nil && v > 0 {
		pipelines = v
	}
	fl, err := fleetgen.Generate(fleetgen.Config{Seed: 21, Pipelines: pipelines, Clients: 8, Epochs: 3, FirstEpoch: pipelines / 2})
	if err != nil {
		b.Fatal(err)
	}
	cache, err := OpenCache(b.TempDir(), CacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	const unit = 100 // event time per slot
	vb := &versionedBlocks{hist: map[string][]versionAt{}}
	for i := range fl.Slots() {
		vb.add(Block{Ref: blockref.New(fmt.Sprintf("b%04d", i), 1), RawObject: fmt.Sprintf("raw/ads/b%04d.arrow", i),
			MinEvent: int64(i * unit), MaxEvent: int64(i*unit + unit - 1), Rows: 1000})
	}
	schema := transform.AdsSchema()
	sched := &fakeSched{}
	f := NewFrontend(FrontendConfig{Cache: cache, Blocks: vb, Scheduler: sched, Clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
		Insertion: insertion.Config{MemoizeAll: true},
		Schema:    func(string) (*transform.Schema, error) { return schema, nil }})
	// Each pipeline at its last registration.
	last := map[int]fleetgen.Step{}
	for _, s := range fl.Steps() {
		last[s.Pipeline] = s
	}
	for i := range fl.Pipelines {
		s, ok := last[i]
		if !ok {
			continue
		}
		p := &fl.Pipelines[i]
		g, err := transform.Parse([]byte(p.DSL), "", transform.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Submit(SubmitRequest{Client: p.Client, Pipeline: p.Name, Priority: p.Priority, Graph: g,
			From: int64(s.From * unit), To: int64(s.To * unit)}); err != nil {
			b.Fatal(err)
		}
	}
	keys, err := cache.ComponentKeys()
	if err != nil {
		b.Fatal(err)
	}
	memoized := map[blockref.Memo]int{} // block -> components memoized over it
	for _, k := range keys {
		memos, err := cache.Memos(k)
		if err != nil {
			b.Fatal(err)
		}
		for ref, e := range memos {
			if err := f.MarkReady(k, ref, e.Gen, 1000, 1000); err != nil {
				b.Fatal(err)
			}
			memoized[ref]++
		}
	}
	changes := invalidationChanges(schema)
	type tally struct {
		tasks, all, blocks int
		took               time.Duration
	}
	var res []tally
	b.ResetTimer()
	for range b.N {
		res = make([]tally, len(changes))
		for _, id := range vb.ids {
			base := vb.newest(id)
			if memoized[blockref.NewMemo(id, 1)] == 0 {
				continue // no pipeline reads it
			}
			for ci, c := range changes {
				v := base
				v.Ref, v.ColumnVersions = blockref.New(id, 2), map[string]int64{}
				for _, col := range c.columns {
					v.ColumnVersions[col] = 2
				}
				start := time.Now()
				inv, err := f.BlockChanged("ads", v)
				if err != nil {
					b.Fatal(err)
				}
				res[ci].took += time.Since(start)
				res[ci].tasks += len(inv.Tasks)
				res[ci].all += memoized[blockref.NewMemo(id, 1)]
				res[ci].blocks++
				for _, t := range inv.Tasks {
					if err := cache.DeleteMemo(t.Component, t.Block); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(keys)), "components")
	b.ReportMetric(float64(res[0].blocks), "blocks")
	var featTasks, featAll, feats int
	for ci, c := range changes {
		r := res[ci]
		if r.blocks == 0 {
			continue
		}
		name := c.name
		b.ReportMetric(float64(r.tasks)/float64(r.blocks), "tasks/block:"+name)
		b.ReportMetric(float64(r.all)/float64(r.blocks), "all/block:"+name)
		b.ReportMetric(float64(r.took.Nanoseconds())/float64(r.blocks), "ns/change:"+name)
		if len(name) > 8 && name[:8] == "feature:" {
			featTasks, featAll, feats = featTasks+r.tasks, featAll+r.all, feats+r.blocks
		}
	}
	if feats > 0 {
		b.ReportMetric(float64(featTasks)/float64(feats), "tasks/block:one-feature")
		b.ReportMetric(float64(featAll)/float64(feats), "all/block:one-feature")
	}
}

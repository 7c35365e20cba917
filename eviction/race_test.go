package eviction_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// jitterRunner delays memoization runs at random before and after the real
// work, so that evictions land at every point of a task: before the object
// is written, between the write and the ready mark, after it. It counts the
// runs under way (a cancelled task's run goes on to the end).
type jitterRunner struct {
	inner   workers.Runner
	running atomic.Int64
	runs    atomic.Int64
}

func (j *jitterRunner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	j.running.Add(1)
	defer j.running.Add(-1)
	j.runs.Add(1)
	time.Sleep(time.Duration(rand.IntN(8)) * time.Millisecond)
	res, err := j.inner.Run(ctx, t)
	time.Sleep(time.Duration(rand.IntN(8)) * time.Millisecond)
	return res, err
}

// idle waits until no task is queued, leased or running.
func (e *env) idle(j *jitterRunner) {
	e.TB.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.Srv.Queue().Backlog() > 0 || j.running.Load() > 0 {
		if time.Now().After(deadline) {
			e.TB.Fatalf("work did not settle: backlog %d, running %d", e.Srv.Queue().Backlog(), j.running.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectedMemo computes the memo object of (k, raw block) afresh, the way
// a worker that predates packs writes it: the component's canonical DSL
// run with transform over the raw block's columns, event_id and the value
// encoded as a block, the value stored narrow as workers store it
// (uncompressed: the env's workers are). expectedColumn is the segment of
// its column in a pack (issue 28), as a worker writes it now.
func (e *env) expectedMemo(k canon.Key, raw block.Meta) []byte {
	data, _ := e.expected(k, raw)
	return data
}

func (e *env) expectedColumn(k canon.Key, raw block.Meta) []byte {
	_, seg := e.expected(k, raw)
	return seg
}

func (e *env) expected(k canon.Key, raw block.Meta) (object, packSegment []byte) {
	e.TB.Helper()
	rec, err := e.Srv.Frontend().Cache().Component(k)
	if err != nil {
		e.TB.Fatal(err)
	}
	s, reg := transform.AdsSchema(), transform.Default()
	g, _, err := transform.ParseAndCheck([]byte(rec.DSL), "component", s, reg, transform.Limits{})
	if err != nil {
		e.TB.Fatal(err)
	}
	cols, err := block.ReadColumns(e.Ctx, e.Srv.Store(), raw, rec.Columns)
	if err != nil {
		e.TB.Fatal(err)
	}
	defer cols.Release()
	out, err := transform.Run(g, reg, cols, g.Inputs[0].Node)
	if err != nil {
		e.TB.Fatal(err)
	}
	defer out[0].Release()
	memo := memo.MemoRecord(cols.Column(0), out[0])
	defer memo.Release()
	data, _, err := block.EncodeWith(block.Meta{Key: block.MemoKey(k, raw.Ref().Memo(1)), ID: raw.ID, Source: raw.Source,
		ComponentKey: k, WindowStart: raw.WindowStart, WindowLength: raw.WindowLength,
		MinEventTime: raw.MinEventTime, MaxEventTime: raw.MaxEventTime, SchemaFingerprint: raw.SchemaFingerprint,
		Late: raw.Late, Generation: raw.Generation}, memo, block.EncodeOptions{Narrow: []string{block.MemoColumn}})
	if err != nil {
		e.TB.Fatal(err)
	}
	pack, pm, err := block.EncodePack(block.NewPackKey(raw.Source, raw.Ref()), raw, cols.Column(0),
		[]block.PackMember{{Component: k, Block: raw.Ref().Memo(1), Value: out[0]}}, block.EncodeOptions{Narrow: []string{block.MemberColumn(k)}})
	if err != nil {
		e.TB.Fatal(err)
	}
	c, _ := pm.Column(block.MemberColumn(k))
	return data, pack[c.Offset : c.Offset+c.Length]
}

// checkConsistent checks the cache against the bucket for components ks:
// every ready entry's object exists and is byte for byte a fresh
// computation; no entry is ready without its object. It returns the
// objects no entry names (orphans).
func (e *env) checkConsistent(ks []canon.Key) (orphans []string) {
	e.TB.Helper()
	raw := map[string]block.Meta{}
	for _, m := range e.Blocks {
		raw[m.ID] = m
	}
	for _, k := range ks {
		ms, err := e.Srv.Frontend().Cache().Memos(k)
		if err != nil {
			e.TB.Fatal(err)
		}
		named := map[string]bool{}
		for id, m := range ms {
			named[m.Object] = true
			if m.State != matching.MemoReady {
				continue
			}
			if m.Packed() {
				// A pack's column (issue 28): checked as readers check it,
				// its segment byte for byte a fresh computation's.
				meta, err := block.ReadFooter(e.Ctx, e.Srv.Store(), m.Object)
				if errors.Is(err, objstore.ErrNotFound) {
					e.TB.Errorf("component %s block %s: ready, pack %s missing (half state)", k.Short(), id, m.Object)
					continue
				}
				if err != nil {
					e.TB.Fatal(err)
				}
				c, err := block.CheckMember(meta, m.Column, k, id, meta.Columns[len(meta.Columns)-1].Type, raw[id.ID()].Rows)
				if err != nil {
					e.TB.Errorf("component %s block %s: %v", k.Short(), id, err)
					continue
				}
				segs, err := block.FetchSegments(e.Ctx, e.Srv.Store(), meta, []string{c.Name})
				if err != nil {
					e.TB.Fatal(err)
				}
				if !bytes.Equal(segs[0], e.expectedColumn(k, raw[id.ID()])) {
					e.TB.Errorf("component %s block %s: column differs from a fresh computation", k.Short(), id)
				}
				if c.Length != m.Bytes {
					e.TB.Errorf("component %s block %s: entry says %d bytes, its column has %d", k.Short(), id, m.Bytes, c.Length)
				}
				continue
			}
			got, _, err := e.Srv.Store().Get(e.Ctx, m.Object)
			if errors.Is(err, objstore.ErrNotFound) {
				e.TB.Errorf("component %s block %s: ready, object %s missing (half state)", k.Short(), id, m.Object)
				continue
			}
			if err != nil {
				e.TB.Fatal(err)
			}
			if !bytes.Equal(got, e.expectedMemo(k, raw[id.ID()])) {
				e.TB.Errorf("component %s block %s: object differs from a fresh computation", k.Short(), id)
			}
			if int64(len(got)) != m.Bytes {
				e.TB.Errorf("component %s block %s: entry says %d bytes, object has %d", k.Short(), id, m.Bytes, len(got))
			}
		}
		for _, o := range e.Objects(k) {
			if !named[o] {
				orphans = append(orphans, o)
			}
		}
	}
	return orphans
}

// TestEvictionRacesWorkers: evictions of the same components run again and
// again while workers memoize them and pipelines read (re-creating the
// entries). When everything settles and a final read completes every
// solution, the cache and the bucket agree: every ready entry has its
// object, equal to a fresh computation byte for byte. Then one more
// eviction races with the workers and nobody reads again: no entry is left
// ready without its object; objects written after the eviction's deletion
// may remain, named by no entry (orphans: never read, and overwritten with
// the same bytes if the block is memoized again).
func TestEvictionRacesWorkers(t *testing.T) {
	jr := &jitterRunner{}
	e := newEnv(t, evictiontest.Config{Blocks: 12, Rows: 300, Workers: 4,
		WrapRunner: func(r workers.Runner) workers.Runner { jr.inner = r; return jr }})
	e.Submit("ctr", "ctr-small", evictiontest.CtrDSL)
	e.Submit("cvr", evictiontest.XSSPipeline, evictiontest.CvrDSL)
	e.Submit("explore", "explore", evictiontest.ExploreDSL)
	op := e.SIG(evictiontest.Operator)
	evict := func() {
		if _, err := op.Evict(e.Ctx, &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: evictiontest.FaultySubgraph},
			Reason: "race"}); err != nil {
			t.Error(err)
		}
	}

	ctx, stop := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	for _, p := range [][2]string{{"ctr", "ctr-small"}, {"cvr", evictiontest.XSSPipeline}} {
		c := e.SIG(p[0])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: p[0], Pipeline: p[1]}); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			}
		}()
	}
	for range 25 {
		time.Sleep(time.Duration(rand.IntN(25)) * time.Millisecond)
		evict()
	}
	stop()
	wg.Wait()

	var all []canon.Key
	for _, p := range [][2]string{{"ctr", "ctr-small"}, {"cvr", evictiontest.XSSPipeline}, {"explore", "explore"}} {
		all = append(all, evictiontest.Components(e.WaitComplete(p[0], p[1]))...)
	}
	e.idle(jr)
	if orphans := e.checkConsistent(all); len(orphans) > 0 {
		t.Errorf("after every solution completed, objects named by no entry: %v", orphans)
	}
	for _, k := range all {
		e.CheckMemoized(k)
	}
	a, err := op.ListAudit(e.Ctx, &sigv1.ListAuditRequest{Limit: 100})
	if err != nil || len(a.Entries) != 25 {
		t.Errorf("audit: %d entries (%v), want 25", len(a.Entries), err)
	}

	// One more eviction while recomputation is under way; nobody reads
	// afterwards.
	evict()
	runs := jr.runs.Load()
	e.Solution("ctr", "ctr-small")
	e.Solution("cvr", evictiontest.XSSPipeline)
	for jr.runs.Load() < runs+4 {
		time.Sleep(100 * time.Microsecond)
	}
	evict()
	e.idle(jr)
	orphans := e.checkConsistent(all)
	t.Logf("%d memoization runs; %d orphan objects after the last eviction", jr.runs.Load(), len(orphans))
	// The sweep deletes them (sigd's loop runs it every interval).
	ev := e.Srv.Evictor()
	ev.SweepAfter = time.Nanosecond
	n, err := ev.Sweep(e.Ctx)
	if err == nil {
		// Packs written after the eviction (issue 28): SweepPacks'.
		var np int
		np, err = ev.SweepPacks(e.Ctx)
		n += np
	}
	// sigd's own loop may have swept some of them meanwhile: this sweep
	// deletes at most the orphans, and none may remain after it (below).
	if err != nil || n > len(orphans) {
		t.Errorf("sweep deleted %d objects (%v), want at most the %d orphans", n, err, len(orphans))
	}
	if orphans := e.checkConsistent(all); len(orphans) > 0 {
		t.Errorf("orphans after the sweep: %v", orphans)
	}
	for _, p := range [][2]string{{"ctr", "ctr-small"}, {"cvr", evictiontest.XSSPipeline}} {
		e.Solution(p[0], p[1])
		e.WaitComplete(p[0], p[1])
	}
	e.idle(jr)
	e.checkConsistent(all)
	for _, k := range all {
		e.CheckMemoized(k)
	}
}

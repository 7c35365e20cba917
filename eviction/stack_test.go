package eviction_test

// The stack: the Evictor on the real pieces below sigd, wired as sigd wires
// them (sigd/evict.go, newEvictor; sigd/server.go, New): a matching
// frontend over a matching.Cache in a temporary Pebble directory, a
// workers.Queue as the frontend's scheduler and the evictor's canceler,
// and objstore/memstore (held to MinIO's semantics by objstore's
// conformance test) holding raw blocks of Ads events. The test is the
// worker: it leases a task, computes the block from raw columns, writes the
// memo object and marks the entry ready, as sigd's pool and completion hook
// do. No sigd, no network, no clock but a fake one: what these tests check
// is what the Evictor decides and the state it leaves in the cache, the
// queue and the bucket. How sigd serves it (gRPC, roles, readers' reports)
// is checked on a running sigd (grpc_test.go, sigd/repair_test.go,
// sigd/guard_test.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// The stack's pipelines. tokenizer is the faulty subgraph: ctr's
// query_ids and cvr's q_small contain it, ctr's price and explore's adv do
// not.
const (
	tokenizer = `unigrams(lower(col("query")))`
	ctrGraph  = `input query_ids = hash(unigrams(lower(col("query"))), buckets=1000)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
`
	cvrGraph     = `input q_small = hash(unigrams(lower(col("query"))), buckets=100)`
	exploreGraph = `input adv = hash(col("advertiser_id"), buckets=100)`
)

// priorities of the stack's pipelines (client/p): a block rescheduled for
// ctr must run at 700.
var priorities = map[string]int32{"ctr": 700, "cvr": 5, "explore": 1}

type stack struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	store *memstore.Store
	queue *workers.Queue
	f     *matching.Frontend
	ev    *eviction.Evictor
	raw   []block.Meta // raw blocks, in event order

	recomputes atomic.Int64 // calls of ev.Recompute (reports may come at once)

	faulty map[workers.TaskID]bool // tasks whose next run writes wrong values
	// build is the worker build the test leases as (work); wrong are the
	// builds every run of which writes wrong values (a misbuilt binary).
	build string
	wrong map[string]bool
}

// newStack writes nblocks raw blocks of rows events and builds the
// frontend, the queue and the evictor over them, with policy p.
func newStack(t *testing.T, nblocks, rows int, p eviction.Policy) *stack {
	t.Helper()
	s := &stack{t: t, ctx: t.Context(), clk: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		store: memstore.New(), faulty: map[workers.TaskID]bool{}, wrong: map[string]bool{}}
	g := gen.New(gen.Config{Seed: 11, LateFraction: -1})
	sc := transform.AdsSchema()
	hour := int64(time.Hour / time.Microsecond)
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range nblocks {
		rec := g.Records(rows, rows)[0]
		kr := block.KafkaRange{Topic: "raw.ads", First: int64(i * rows), Last: int64((i+1)*rows - 1)}
		window := epoch + int64(i)*hour
		id := block.ID(window, kr)
		m, err := block.Write(s.ctx, s.store, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
			WindowStart: window, WindowLength: hour, SchemaFingerprint: sc.Fingerprint(), Kafka: &kr}, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		s.raw = append(s.raw, m)
	}
	cache, err := matching.OpenCache(t.TempDir(), matching.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	// Quarantines and releases mirrored into the entries, as sigd's
	// onQueueEvent does.
	s.queue, err = workers.Open(t.TempDir(), workers.Options{Clock: s.clk, LeaseTTL: 10 * time.Second, OnEvent: func(e workers.Event) {
		switch e.Kind {
		case workers.EventQuarantined:
			_ = s.f.MarkFailed(e.Task.ID.Component, e.Task.ID.Block, e.Task.Err)
		case workers.EventReleased:
			_ = s.f.MarkPending(e.Task.ID.Component, e.Task.ID.Block)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.queue.Close() })
	s.f = matching.NewFrontend(matching.FrontendConfig{Cache: cache, Blocks: rawBlocks{s}, Scheduler: queueScheduler{s.queue},
		Schema: func(source string) (*transform.Schema, error) {
			if source != "ads" {
				return nil, fmt.Errorf("unknown raw source %q", source) // as sigd's schema
			}
			return sc, nil
		}, Clock: s.clk,
		Insertion: insertion.Config{MemoizeAll: true}}) // sigd's default: every input memoized whole
	// Interval and Log as sigd leaves them by default: no test here runs
	// the loop (TestTTLEviction runs sigd's).
	s.ev = &eviction.Evictor{Frontend: s.f, Queue: queueCanceler{s.queue}, Store: s.store, Clock: s.clk, Policy: p,
		Versions: s, Recompute: s.recompute, Builds: queueBuilds{s.queue}}
	return s
}

// queueScheduler and queueCanceler adapt the work queue as sigd's adapters
// of the same names do (sigd/server.go, sigd/evict.go).
type queueScheduler struct{ q *workers.Queue }

func (a queueScheduler) Enqueue(k canon.Key, block blockref.Memo, client, pipeline string, prio int32) error {
	_, err := a.q.Enqueue(workers.Request{Task: workers.TaskID{Component: k, Block: block},
		Client: client, Pipeline: pipeline, Priority: prio})
	return err
}

// queueBuilds adapts the work queue as sigd's adapter of the same name
// does (sigd/evict.go).
type queueBuilds struct{ q *workers.Queue }

func (b queueBuilds) BanBuild(build, reason string) (bool, int, error) {
	return b.q.BanBuild(build, reason)
}

func (b queueBuilds) Quarantine(k canon.Key, block blockref.Memo, reason string) (bool, error) {
	return b.q.Quarantine(workers.TaskID{Component: k, Block: block}, reason)
}

type queueCanceler struct{ q *workers.Queue }

func (c queueCanceler) Cancel(k canon.Key, block blockref.Memo) error {
	_, err := c.q.Cancel(workers.TaskID{Component: k, Block: block})
	return err
}

// rawBlocks lists every raw block for any range (the pipelines read them
// all), as the catalog lists blocks that never changed.
type rawBlocks struct{ s *stack }

func (r rawBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	out := make([]matching.Block, len(r.s.raw))
	for i, m := range r.s.raw {
		out[i] = matching.BlockOf(m)
	}
	return out, nil
}

// Versions is the evictor's catalog (matching.RawVersions): the stack's
// blocks never change, so each has its version 1 only.
func (s *stack) Versions(source, id string) ([]block.Meta, error) {
	for _, m := range s.raw {
		if m.ID == id && m.Source == source {
			return []block.Meta{m}, nil
		}
	}
	return nil, fmt.Errorf("raw block %s/%s: %w", source, id, matching.ErrNotFound)
}

// rawBlock is the raw block of memo block ref (input version 1).
func (s *stack) rawBlock(source string, ref blockref.Memo) (block.Meta, error) {
	vs, err := s.Versions(source, ref.ID())
	if err != nil {
		return block.Meta{}, err
	}
	return vs[0], nil
}

// recompute is the evictor's Recompute (sigd's: eviction.RecomputeFromRaw), counted.
func (s *stack) recompute(ctx context.Context, rec matching.ComponentRecord, raw block.Meta) (arrow.Array, error) {
	s.recomputes.Add(1)
	return s.column(ctx, rec, raw)
}

// column computes component rec's column over raw block raw from its raw
// columns, as a worker does (through the evictor's own recomputation).
func (s *stack) column(ctx context.Context, rec matching.ComponentRecord, raw block.Meta) (arrow.Array, error) {
	return eviction.RecomputeFromRaw(s.store, func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil })(ctx, rec, raw)
}

// submit submits a pipeline "p" of client over every block.
func (s *stack) submit(client, dsl string) {
	s.t.Helper()
	g, err := transform.Parse([]byte(dsl), client, transform.Limits{})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.f.Submit(matching.SubmitRequest{Client: client, Pipeline: "p", Priority: priorities[client], Graph: g,
		From: s.raw[0].WindowStart, To: s.raw[len(s.raw)-1].WindowStart + s.raw[len(s.raw)-1].WindowLength}); err != nil {
		s.t.Fatal(err)
	}
}

// read reads client's pipeline's solution (which re-creates evicted
// entries pending and schedules them, and counts as a request).
func (s *stack) read(client string) *matching.Solution {
	s.t.Helper()
	sol, err := s.f.ReadSolution(client, "p", 0, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	return sol
}

// input returns the component of a pipeline's input.
func (s *stack) input(client, name string) canon.Key {
	s.t.Helper()
	for _, in := range s.read(client).Inputs {
		if in.Name == name {
			return in.Component
		}
	}
	s.t.Fatalf("%s/p has no input %q", client, name)
	return canon.Key{}
}

// work runs every queued task to completion, leasing as s.build, and
// returns how many ran.
func (s *stack) work() int {
	s.t.Helper()
	n := 0
	for {
		l, ok, err := s.queue.TryLeaseAs("w", s.build)
		if err != nil {
			s.t.Fatal(err)
		}
		if !ok {
			return n
		}
		n++
		res := s.run(l.Task.ID, l.Build)
		if err := s.queue.Complete(s.ctx, l.ID, res); err != nil {
			s.t.Fatal(err)
		}
	}
}

// run memoizes one task: the pending entry's generation, the memo object
// written as workers/memo writes it (its event_id segment encoded as the
// raw block's), the entry marked ready. A faulty task's object holds every
// row's value shifted up by one row: sound bytes, wrong values (the fault
// the shared-fate guard catches), as is every object of a build in
// s.wrong. The entry records the build (the lease's, as sigd's completion
// does).
func (s *stack) run(id workers.TaskID, build string) workers.Result {
	s.t.Helper()
	k, ref := id.Component, id.Block
	gen, pending, err := s.f.Begin(k, ref)
	if err != nil {
		s.t.Fatal(err)
	}
	if !pending {
		return workers.Result{}
	}
	rec, err := s.f.Cache().Component(k)
	if err != nil {
		s.t.Fatal(err)
	}
	raw, err := s.rawBlock(rec.Source, ref)
	if err != nil {
		s.t.Fatal(err)
	}
	ids, err := block.ReadColumns(s.ctx, s.store, raw, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer ids.Release()
	v, err := s.column(s.ctx, rec, raw)
	if err != nil {
		s.t.Fatal(err)
	}
	defer v.Release()
	faulty := s.faulty[id] || s.wrong[build]
	delete(s.faulty, id)
	if faulty {
		v = rotate(s.t, v)
		defer v.Release()
	}
	m := memo.MemoRecord(ids.Column(0), v)
	defer m.Release()
	ev, _ := raw.Column(transform.ColEventID)
	written, err := block.WriteWith(s.ctx, s.store, block.Meta{Key: block.MemoKey(k, ref), ID: raw.ID, Source: raw.Source,
		ComponentKey: k, WindowStart: raw.WindowStart, WindowLength: raw.WindowLength,
		MinEventTime: raw.MinEventTime, MaxEventTime: raw.MaxEventTime, SchemaFingerprint: raw.SchemaFingerprint},
		m, block.EncodeOptions{Columns: map[string]block.Compression{transform.ColEventID: ev.Compression}})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.f.MarkReadyBy(k, ref, gen, written.Rows, written.Size, build); err != nil {
		s.t.Fatal(err)
	}
	return workers.Result{Rows: written.Rows, Bytes: written.Size}
}

// rotate returns v with every row holding the next row's value.
func rotate(t *testing.T, v arrow.Array) arrow.Array {
	t.Helper()
	head, tail := array.NewSlice(v, 1, int64(v.Len())), array.NewSlice(v, 0, 1)
	defer head.Release()
	defer tail.Release()
	out, err := array.Concatenate([]arrow.Array{head, tail}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pipelines submits ctr's, cvr's and explore's pipelines, a minute apart,
// and computes every block.
func (s *stack) pipelines() {
	s.t.Helper()
	for _, p := range [][2]string{{"explore", exploreGraph}, {"cvr", cvrGraph}, {"ctr", ctrGraph}} {
		s.submit(p[0], p[1])
		s.clk.Advance(time.Minute)
	}
	s.work()
}

func (s *stack) memo(k canon.Key, ref blockref.Memo) matching.MemoEntry {
	s.t.Helper()
	m, err := s.f.Cache().Memo(k, ref)
	if err != nil {
		s.t.Fatalf("memo entry %s/%s: %v", k.Short(), ref, err)
	}
	return m
}

// objects lists a component's memo objects.
func (s *stack) objects(k canon.Key) []string {
	s.t.Helper()
	var out []string
	for info, err := range s.store.List(s.ctx, block.MemoComponentPrefix(k)) {
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, info.Key)
	}
	return out
}

// checkMemoized: every block of k is ready, with its object.
func (s *stack) checkMemoized(k canon.Key) {
	s.t.Helper()
	ms, err := s.f.Cache().Memos(k)
	if err != nil {
		s.t.Fatal(err)
	}
	ready := 0
	for _, m := range ms {
		if m.State == matching.MemoReady {
			ready++
		}
	}
	if ready != len(s.raw) || len(ms) != len(s.raw) {
		s.t.Errorf("component %s: %d entries, %d ready; want %d ready", k.Short(), len(ms), ready, len(s.raw))
	}
	if objs := s.objects(k); len(objs) != len(s.raw) {
		s.t.Errorf("component %s: memo objects %v, want %d", k.Short(), objs, len(s.raw))
	}
}

// checkEvicted: k has neither entries nor objects.
func (s *stack) checkEvicted(k canon.Key) {
	s.t.Helper()
	if ms, err := s.f.Cache().Memos(k); err != nil || len(ms) != 0 {
		s.t.Errorf("component %s: %d entries (%v) after eviction, want none", k.Short(), len(ms), err)
	}
	if objs := s.objects(k); len(objs) != 0 {
		s.t.Errorf("component %s: objects %v after eviction, want none", k.Short(), objs)
	}
}

// task returns the queued task of (k, ref), if any.
func (s *stack) task(k canon.Key, ref string) (workers.Task, bool) {
	return s.queue.Get(workers.TaskID{Component: k, Block: blockref.ParseMemo(ref)})
}

func (s *stack) audit() []matching.AuditEntry {
	s.t.Helper()
	a, err := s.f.Cache().Audit(100)
	if err != nil {
		s.t.Fatal(err)
	}
	return a
}

// get reads an object's bytes.
func (s *stack) get(key string) []byte {
	s.t.Helper()
	data, _, err := s.store.Get(s.ctx, key)
	if err != nil {
		s.t.Fatal(err)
	}
	return data
}

// pending counts the pending blocks of a solution's inputs on ks.
func pending(sol *matching.Solution, ks ...canon.Key) int {
	n := 0
	for _, in := range sol.Inputs {
		if !slices.Contains(ks, in.Component) {
			continue
		}
		for _, b := range in.Blocks {
			if b.State == matching.MemoPending {
				n++
			}
		}
	}
	return n
}

func sortedKeys(ks ...canon.Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	sort.Strings(out)
	return out
}

// inputError reports whether err is a matching.InputError naming field.
func inputError(err error, field string) bool {
	var ie *matching.InputError
	return errors.As(err, &ie) && ie.Field == field
}

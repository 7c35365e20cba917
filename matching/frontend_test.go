package matching

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

type fakeBlocks struct{ blocks []Block }

func (f *fakeBlocks) Range(source string, from, to int64) ([]Block, error) {
	var out []Block
	for _, b := range f.blocks {
		if b.MaxEvent >= from && b.MinEvent < to {
			out = append(out, b)
		}
	}
	return out, nil
}

type enq struct {
	comp             canon.Key
	block            string
	client, pipeline string
	prio             int32
}

type fakeSched struct {
	mu    sync.Mutex
	calls []enq
	tasks map[string]bool
}

func (f *fakeSched) Enqueue(k canon.Key, ref blockref.Memo, client, pipeline string, prio int32) error {
	block := ref.String()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tasks == nil {
		f.tasks = map[string]bool{}
	}
	f.calls = append(f.calls, enq{k, block, client, pipeline, prio})
	f.tasks[k.String()+"/"+block] = true
	return nil
}

func newTestFrontend(t *testing.T, nblocks int) (*Frontend, *fakeSched, *clock.Fake) {
	t.Helper()
	cache, err := OpenCache(t.TempDir(), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	fb := &fakeBlocks{}
	for i := 0; i < nblocks; i++ {
		fb.blocks = append(fb.blocks, Block{Ref: blockref.New(fmt.Sprintf("b%03d", i), 1), RawObject: fmt.Sprintf("raw/ads/b%03d.arrow", i),
			MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99), Rows: 100})
	}
	sched := &fakeSched{}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	// The frontend's mechanics under the paper's insertion policy: every
	// component memoized whole (covers have their own tests, cover_test.go).
	f := NewFrontend(FrontendConfig{Cache: cache, Blocks: fb, Scheduler: sched, Clock: clk,
		Insertion: insertion.Config{MemoizeAll: true},
		Schema: func(src string) (*transform.Schema, error) {
			if src != "ads" {
				return nil, fmt.Errorf("unknown source %q", src)
			}
			return transform.AdsSchema(), nil
		}})
	return f, sched, clk
}

func mustParse(t *testing.T, src string) *transform.Graph {
	t.Helper()
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const graphA = `
let q = unigrams(lower(col("query")))
let t = unigrams(lower(col("ad_title")))
input overlap = concat(intersect(q, t), col("ad_category"))
input qid = hash(q, buckets=1000)
`

const graphB = `
input overlap2 = concat(intersect(unigrams(lower(col("ad_title"))), unigrams(lower(col("query")))), col("ad_category"))
input price = bucketize(col("bid_price"), boundaries=[1, 2])
`

func TestSubmitSharesComponentsAndSchedulesOnce(t *testing.T) {
	f, sched, _ := newTestFrontend(t, 4)
	ra, err := f.Submit(SubmitRequest{Client: "c1", Pipeline: "a", Priority: 5, Graph: mustParse(t, graphA), From: 0, To: 400})
	if err != nil {
		t.Fatal(err)
	}
	if ra.Components != 2 || ra.ComponentHits != 0 || ra.BlockMisses != 8 || ra.TasksEnqueued != 8 {
		t.Fatalf("first submit: %+v", ra)
	}
	rb, err := f.Submit(SubmitRequest{Client: "c2", Pipeline: "b", Priority: 9, Graph: mustParse(t, graphB), From: 0, To: 400})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Components != 2 || rb.ComponentHits != 1 {
		t.Fatalf("second submit: %+v", rb)
	}
	if len(sched.tasks) != 12 {
		t.Fatalf("distinct tasks = %d, want 12 (3 components x 4 blocks)", len(sched.tasks))
	}
	// The shared component's tasks were requested by both pipelines.
	shared := ra.Solution.Inputs[0].Component
	if rb.Solution.Inputs[0].Component != shared {
		t.Fatal("overlap and overlap2 must share a component")
	}
	var requesters []string
	for _, c := range sched.calls {
		if c.comp == shared && c.block == "b000" {
			requesters = append(requesters, fmt.Sprintf("%s/%s@%d", c.client, c.pipeline, c.prio))
		}
	}
	sort.Strings(requesters)
	if fmt.Sprint(requesters) != "[c1/a@5 c2/b@9]" {
		t.Fatalf("requesters of shared task: %v", requesters)
	}

	// Workers complete the shared component: both solutions see it ready.
	for i := 0; i < 4; i++ {
		blk := fmt.Sprintf("b%03d", i)
		gen, ok, err := f.Begin(shared, blockref.ParseMemo(blk))
		if err != nil || !ok {
			t.Fatalf("begin: %v %v", ok, err)
		}
		if err := f.MarkReady(shared, blockref.ParseMemo(blk), gen, 100, 1234); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := f.ReadSolution("c2", "b", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Ready != 4 || sb.Pending != 4 || sb.Complete() {
		t.Fatalf("solution b: ready %d pending %d", sb.Ready, sb.Pending)
	}
	for _, blk := range sb.Inputs[0].Blocks {
		if blk.State != MemoReady || blk.Object != block.MemoKey(shared, blk.Block.Ref.Memo(1)) || blk.Bytes != 1234 {
			t.Fatalf("block %+v", blk)
		}
	}

	// Re-submitting the same graph is idempotent: hits now, nothing new.
	before := len(sched.tasks)
	ra2, err := f.Submit(SubmitRequest{Client: "c1", Pipeline: "a", Priority: 5, Graph: mustParse(t, graphA), From: 0, To: 400})
	if err != nil {
		t.Fatal(err)
	}
	if ra2.ComponentHits != 2 || ra2.BlockHits != 4 || len(sched.tasks) != before {
		t.Fatalf("resubmit: %+v, tasks %d -> %d", ra2, before, len(sched.tasks))
	}
	users, _ := f.Cache().Users(shared)
	if len(users) != 2 {
		t.Fatalf("users of shared component: %v", users)
	}
}

func TestMarkReadyRefusesStaleGeneration(t *testing.T) {
	f, _, _ := newTestFrontend(t, 1)
	r, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", Graph: mustParse(t, `input x = lower(col("query"))`), From: 0, To: 100})
	if err != nil {
		t.Fatal(err)
	}
	k := r.Solution.Inputs[0].Component
	gen, _, _ := f.Begin(k, blockref.ParseMemo("b000"))
	// An eviction removes the entry; the pipeline re-reads, re-creating it.
	if err := f.Evicting([]canon.Key{k}, func() error { return f.Cache().DeleteMemo(k, blockref.ParseMemo("b000")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadSolution("c", "p", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkReady(k, blockref.ParseMemo("b000"), gen, 1, 1); !errors.Is(err, ErrStale) {
		t.Fatalf("stale MarkReady: %v, want ErrStale", err)
	}
	gen2, ok, _ := f.Begin(k, blockref.ParseMemo("b000"))
	if !ok || gen2 == gen {
		t.Fatalf("new generation: ok=%v gen %d -> %d", ok, gen, gen2)
	}
	if err := f.MarkReady(k, blockref.ParseMemo("b000"), gen2, 1, 1); err != nil {
		t.Fatal(err)
	}
}

func TestSubmitBadRequestsChangeNothing(t *testing.T) {
	f, sched, _ := newTestFrontend(t, 2)
	huge := ""
	for i := 0; i < 300; i++ {
		huge += "lower("
	}
	huge = "input x = " + huge + `col("query")` + fmt.Sprint(repeat(")", 300)) + "\n"
	cases := []struct {
		name  string
		req   SubmitRequest
		field string
	}{
		{"unknown column", SubmitRequest{Client: "c", Pipeline: "p", Graph: mustParse(t, `input x = lower(col("nope"))`), To: 10}, "graph"},
		{"empty range", SubmitRequest{Client: "c", Pipeline: "p", Graph: mustParse(t, graphA), From: 10, To: 10}, "range"},
		{"bad client", SubmitRequest{Client: "<script>", Pipeline: "p", Graph: mustParse(t, graphA), To: 10}, "client"},
		{"bad priority", SubmitRequest{Client: "c", Pipeline: "p", Priority: -1, Graph: mustParse(t, graphA), To: 10}, "priority"},
		{"unknown source", SubmitRequest{Client: "c", Pipeline: "p", Source: "zzz", Graph: mustParse(t, graphA), To: 10}, "graph.raw_source"},
		{"type error", SubmitRequest{Client: "c", Pipeline: "p", Graph: mustParse(t, `input x = unigrams(col("bid_price"))`), To: 10}, "graph"},
	}
	for _, tc := range cases {
		_, err := f.Submit(tc.req)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: err = %v, want InputError on %s", tc.name, err, tc.field)
		}
	}
	if g, err := transform.Parse([]byte(huge), "", transform.Limits{}); err == nil {
		if _, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", Graph: g, To: 10}); err == nil {
			t.Error("huge graph accepted")
		}
	}
	keys, _ := f.Cache().ComponentKeys()
	ps, _ := f.Cache().Pipelines("")
	if len(keys) != 0 || len(ps) != 0 || len(sched.calls) != 0 {
		t.Fatalf("bad requests changed state: %d components, %d pipelines, %d tasks", len(keys), len(ps), len(sched.calls))
	}
}

func repeat(s string, n int) string {
	out := ""
	for i := 0; i < n; i++ {
		out += s
	}
	return out
}

func TestReconcileReschedulesPending(t *testing.T) {
	f, sched, _ := newTestFrontend(t, 3)
	if _, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", Priority: 7, Graph: mustParse(t, `input x = lower(col("query"))`), To: 300}); err != nil {
		t.Fatal(err)
	}
	sched.calls, sched.tasks = nil, nil
	n, err := f.Reconcile()
	if err != nil || n != 3 || len(sched.tasks) != 3 || sched.calls[0].prio != 7 {
		t.Fatalf("reconcile: n=%d err=%v tasks=%d calls=%v", n, err, len(sched.tasks), sched.calls)
	}
}

func TestWatchSeesReady(t *testing.T) {
	f, _, _ := newTestFrontend(t, 1)
	r, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", Graph: mustParse(t, `input x = lower(col("query"))`), To: 100})
	if err != nil {
		t.Fatal(err)
	}
	k := r.Solution.Inputs[0].Component
	ch, cancel := f.Watch([]canon.Key{k})
	defer cancel()
	gen, _, _ := f.Begin(k, blockref.ParseMemo("b000"))
	if err := f.MarkReady(k, blockref.ParseMemo("b000"), gen, 5, 6); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ch:
		if e.State != MemoReady || e.Block != blockref.NewMemo("b000", 1) {
			t.Fatalf("got %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
}

// TestInvalidateOneIncarnation: a ready block found corrupt turns pending
// with a new generation and watchers are told; only the incarnation that
// was checked can be invalidated, and only the new one marked ready.
// Schedule asks for the task at each using pipeline's priority.
func TestInvalidateOneIncarnation(t *testing.T) {
	f, sched, _ := newTestFrontend(t, 2)
	graph := mustParse(t, `input x = lower(col("query"))`)
	for _, p := range []struct {
		name string
		prio int32
	}{{"p", 3}, {"q", 9}} {
		if _, err := f.Submit(SubmitRequest{Client: "c", Pipeline: p.name, Priority: p.prio, Graph: graph, To: 200}); err != nil {
			t.Fatal(err)
		}
	}
	sol, err := f.ReadSolution("c", "p", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := sol.Inputs[0].Component
	gen, _, _ := f.Begin(k, blockref.ParseMemo("b000"))
	if _, err := f.Invalidate(k, blockref.ParseMemo("b000"), gen, "corrupt"); !errors.Is(err, ErrStale) {
		t.Fatalf("invalidating a pending block: %v, want ErrStale", err)
	}
	if err := f.MarkReady(k, blockref.ParseMemo("b000"), gen, 100, 10); err != nil {
		t.Fatal(err)
	}
	ch, cancel := f.Watch([]canon.Key{k})
	defer cancel()
	if _, err := f.Invalidate(k, blockref.ParseMemo("b000"), gen+2, "corrupt"); !errors.Is(err, ErrStale) {
		t.Fatalf("invalidating another generation: %v, want ErrStale", err)
	}
	e, err := f.Invalidate(k, blockref.ParseMemo("b000"), gen, "corrupt")
	if err != nil {
		t.Fatal(err)
	}
	if e.State != MemoPending || e.Gen == gen || e.Gen == 0 || e.Error != "corrupt" || e.Rows != 0 {
		t.Fatalf("after invalidate: %+v (old generation %d)", e, gen)
	}
	select {
	case n := <-ch:
		if n.State != MemoPending || n.Block != blockref.NewMemo("b000", 1) {
			t.Fatalf("notified %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	if _, err := f.Invalidate(k, blockref.ParseMemo("b000"), gen, "again"); !errors.Is(err, ErrStale) {
		t.Fatalf("invalidating twice: %v, want ErrStale", err)
	}
	if err := f.MarkReady(k, blockref.ParseMemo("b000"), gen, 100, 10); !errors.Is(err, ErrStale) {
		t.Fatalf("a worker of the old generation marks ready: %v, want ErrStale", err)
	}
	sched.calls, sched.tasks = nil, nil
	if n, err := f.Schedule(k, blockref.ParseMemo("b000")); err != nil || n != 2 {
		t.Fatalf("schedule: %d pipelines, %v", n, err)
	}
	prios := map[string]int32{}
	for _, c := range sched.calls {
		if c.comp != k || c.block != "b000" {
			t.Errorf("scheduled %+v", c)
		}
		prios[c.pipeline] = c.prio
	}
	if prios["p"] != 3 || prios["q"] != 9 {
		t.Errorf("scheduled at priorities %v, want p:3 q:9", prios)
	}
	if err := f.MarkReady(k, blockref.ParseMemo("b000"), e.Gen, 100, 10); err != nil {
		t.Fatal(err)
	}
}

// TestEnqueueBlockByBlock: a submit schedules its missing tasks block by
// block in event order, every component of a block together, so that a
// worker draining the queue in order reads each block's raw columns once
// for all its components, smaller cones first (a nested memo node before
// the memo nodes containing it, which workers then compute over it). A
// second input sharing a component schedules nothing more.
func TestEnqueueBlockByBlock(t *testing.T) {
	f, sched, _ := newTestFrontend(t, 3)
	const graph = `input a = hash(unigrams(lower(col("query"))), buckets=100)
input b = bucketize(col("bid_price"), boundaries=[1, 2])
input c = hash(unigrams(lower(col("query"))), buckets=100)`
	r, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", Priority: 1, Graph: mustParse(t, graph), From: 0, To: 300})
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := r.Solution.Inputs[0].Component, r.Solution.Inputs[1].Component
	if r.Solution.Inputs[2].Component != ka {
		t.Fatal("inputs a and c should share their component")
	}
	var got, want []string
	for _, c := range sched.calls {
		got = append(got, c.block+" "+c.comp.String()[:8])
	}
	for _, b := range []string{"b000", "b001", "b002"} {
		want = append(want, b+" "+kb.String()[:8], b+" "+ka.String()[:8]) // b's cone has 2 nodes, a's 4
	}
	if !slices.Equal(got, want) {
		t.Errorf("enqueued\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.TasksEnqueued != 6 || r.Solution.Pending != 9 {
		t.Errorf("%d tasks enqueued, %d input blocks pending; want 6 and 9", r.TasksEnqueued, r.Solution.Pending)
	}
}

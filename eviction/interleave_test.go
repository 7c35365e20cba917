package eviction_test

// Eviction interleaved step by step with reads and a worker, on a matching
// frontend and an evictor built directly (real Pebble, real MinIO), with
// hooks in the scheduler and the task canceler to stop each side at the
// point that matters.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

type fakeBlocks struct{ blocks []matching.Block }

func (f *fakeBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	return f.blocks, nil
}

// hookSched records enqueues; hook, if set, runs on each (outside the lock).
type hookSched struct {
	mu    sync.Mutex
	calls []string
	hook  func(k canon.Key, block string)
}

func (s *hookSched) Enqueue(k canon.Key, ref blockref.Memo, client, pipeline string, prio int32) error {
	block := ref.String()
	s.mu.Lock()
	s.calls = append(s.calls, block)
	h := s.hook
	s.mu.Unlock()
	if h != nil {
		h(k, block)
	}
	return nil
}

func (s *hookSched) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// hookCancel is the evictor's task canceler; it runs between the deletion of
// the memo entries and of the objects.
type hookCancel struct{ hook func() }

func (c *hookCancel) Cancel(component canon.Key, block blockref.Memo) error {
	if c.hook != nil {
		c.hook()
	}
	return nil
}

type rig struct {
	minio  *devenv.MinIO
	f      *matching.Frontend
	ev     *eviction.Evictor
	store  *objstore.Store
	sched  *hookSched
	cancel *hookCancel
	key    canon.Key
	blocks []matching.Block
}

func newRig(t *testing.T, nblocks int) *rig {
	t.Helper()
	m := devenv.NewMinIO(t)
	st := m.NewStore(t, objstore.Config{Bucket: "sig", RetryFor: 2 * time.Second})
	cache, err := matching.OpenCache(t.TempDir(), matching.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	r := &rig{minio: m, store: st, sched: &hookSched{}, cancel: &hookCancel{}}
	fb := &fakeBlocks{}
	for i := range nblocks {
		fb.blocks = append(fb.blocks, matching.Block{Ref: blockref.New(fmt.Sprintf("b%03d", i), 1), RawObject: fmt.Sprintf("raw/ads/b%03d.arrow", i),
			MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99), Rows: 100})
	}
	r.blocks = fb.blocks
	r.f = matching.NewFrontend(matching.FrontendConfig{Cache: cache, Blocks: fb, Scheduler: r.sched,
		Insertion: insertion.Config{MemoizeAll: true}, // every input its component's memo objects
		Schema:    func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil }})
	r.ev = &eviction.Evictor{Frontend: r.f, Queue: r.cancel, Store: st}
	g, err := transform.Parse([]byte(`input q = hash(unigrams(lower(col("query"))), buckets=100)`), "g", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.f.Submit(matching.SubmitRequest{Client: "ctr", Pipeline: "p", Graph: g, From: 0, To: int64(nblocks * 100)})
	if err != nil {
		t.Fatal(err)
	}
	r.key = res.Solution.Inputs[0].Component
	return r
}

// work is a worker memoizing (key, block): it takes the pending entry's
// generation, writes the object and marks the entry ready.
func (r *rig) work(t *testing.T, block string) {
	t.Helper()
	gen, ok, err := r.f.Begin(r.key, blockref.ParseMemo(block))
	if err != nil || !ok {
		t.Fatalf("begin %s: %v %v", block, ok, err)
	}
	r.write(t, block)
	if err := r.f.MarkReady(r.key, blockref.ParseMemo(block), gen, 100, 10); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) write(t *testing.T, id string) {
	t.Helper()
	if _, err := r.store.Put(context.Background(), block.MemoKey(r.key, blockref.ParseMemo(id)), []byte("memo"), nil); err != nil {
		t.Fatal(err)
	}
}

// checkNoHalfState: no memo entry is ready without its object.
func (r *rig) checkNoHalfState(t *testing.T) {
	t.Helper()
	ms, err := r.f.Cache().Memos(r.key)
	if err != nil {
		t.Fatal(err)
	}
	for b, m := range ms {
		if m.State != matching.MemoReady {
			continue
		}
		if _, err := r.store.Stat(context.Background(), m.Object); errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("block %s: entry ready, object %s gone (half state)", b, m.Object)
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestEvictionDuringEntryCreation: a read re-creating a component's
// evicted entries is at its second block when an eviction of the component
// starts; the eviction has deleted the entries (the read's first one among
// them) and not yet the objects when the read creates the second block's
// entry; a worker computes that block and writes its object; the eviction
// deletes the objects; the worker marks the entry ready. Unless creating
// an entry and starting an eviction exclude each other, the entry ends
// ready without its object, and a reader trusting the read solution fails
// on data the cache says is there.
func TestEvictionDuringEntryCreation(t *testing.T) {
	r := newRig(t, 2)
	ctx := context.Background()
	b0, b1 := r.blocks[0].Ref.ID(), r.blocks[1].Ref.ID()
	r.work(t, b0)
	r.work(t, b1)
	if _, err := r.ev.Evict(ctx, eviction.Target{Components: []canon.Key{r.key}}, "op", "first"); err != nil {
		t.Fatal(err)
	}

	readAtB0, releaseRead := make(chan struct{}), make(chan struct{})
	r.sched.hook = func(k canon.Key, block string) {
		if block == b0 {
			close(readAtB0)
			<-releaseRead
		}
	}
	evictorAtCancel, releaseEvictor := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.cancel.hook = func() {
		once.Do(func() {
			close(evictorAtCancel)
			<-releaseEvictor
		})
	}

	readDone := make(chan error, 1)
	go func() { _, err := r.f.ReadSolution("ctr", "p", 0, 0); readDone <- err }()
	wait(t, readAtB0, "the read to create block 0's entry")
	evictDone := make(chan error, 1)
	go func() {
		_, err := r.ev.Evict(ctx, eviction.Target{Components: []canon.Key{r.key}}, "op", "second")
		evictDone <- err
	}()
	wait(t, evictorAtCancel, "the eviction to delete the entries")
	close(releaseRead)
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	// A worker picks block 1 up if the read created its entry.
	gen, pending, err := r.f.Begin(r.key, blockref.ParseMemo(b1))
	if err != nil {
		t.Fatal(err)
	}
	if pending {
		r.write(t, b1)
	}
	close(releaseEvictor)
	if err := <-evictDone; err != nil {
		t.Fatal(err)
	}
	if pending {
		if err := r.f.MarkReady(r.key, blockref.ParseMemo(b1), gen, 100, 10); err != nil && !errors.Is(err, matching.ErrStale) {
			t.Fatal(err)
		}
	}
	r.checkNoHalfState(t)

	// The data is recomputed on demand: the next read creates the entries
	// and schedules them.
	r.sched.hook = nil
	before := r.sched.count()
	sol, err := r.f.ReadSolution("ctr", "p", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sol.Pending != 2 || r.sched.count() != before+2 {
		t.Errorf("after the evictions: %d pending, %d tasks scheduled; want 2 and 2", sol.Pending, r.sched.count()-before)
	}
}

// TestWatcherReReadAfterEviction: a watcher told that an entry was evicted
// re-reads the solution at once (the gRPC watch stream and trainers do);
// that re-read must re-create and schedule the evicted entries, or the
// watcher waits for completions that nothing is computing.
func TestWatcherReReadAfterEviction(t *testing.T) {
	const n = 200
	r := newRig(t, n)
	for _, b := range r.blocks {
		r.work(t, b.Ref.ID())
	}
	ch, cancel := r.f.Watch([]canon.Key{r.key})
	defer cancel()
	evictDone := make(chan error, 1)
	go func() {
		_, err := r.ev.Evict(context.Background(), eviction.Target{Components: []canon.Key{r.key}}, "op", "bug")
		evictDone <- err
	}()
	select {
	case e := <-ch:
		if e.State != 0 {
			t.Fatalf("first change %v, want an eviction (state 0)", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no eviction notice")
	}
	before := r.sched.count()
	if _, err := r.f.ReadSolution("ctr", "p", 0, 0); err != nil {
		t.Fatal(err)
	}
	scheduled := r.sched.count() - before
	if err := <-evictDone; err != nil {
		t.Fatal(err)
	}
	if scheduled != n {
		t.Errorf("the watcher's re-read scheduled %d of %d evicted blocks", scheduled, n)
	}
	r.checkNoHalfState(t)
}

// TestOrphanObjectSwept: a worker computing a block when its component is
// evicted writes its object after the eviction deleted the others. The
// object is an orphan: no entry names it, its ready mark is refused, and
// no read solution points at it. Sweep deletes it once SweepAfter has
// passed (sigd's eviction loop calls Sweep every interval); an object
// whose entry was re-created meanwhile stays, and the recomputation
// replaces it.
func TestOrphanObjectSwept(t *testing.T) {
	r := newRig(t, 2)
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	r.ev.Clock, r.ev.SweepAfter = clk, time.Minute
	b0, b1 := r.blocks[0].Ref.ID(), r.blocks[1].Ref.ID()
	// Two workers have begun both blocks.
	g0, ok0, err0 := r.f.Begin(r.key, blockref.ParseMemo(b0))
	g1, ok1, err1 := r.f.Begin(r.key, blockref.ParseMemo(b1))
	if !ok0 || !ok1 || err0 != nil || err1 != nil {
		t.Fatal("blocks not pending after submit")
	}
	if _, err := r.ev.Evict(ctx, eviction.Target{Components: []canon.Key{r.key}}, "op", "bug"); err != nil {
		t.Fatal(err)
	}
	// They finish after the eviction.
	for b, g := range map[string]uint64{b0: g0, b1: g1} {
		r.write(t, b)
		if err := r.f.MarkReady(r.key, blockref.ParseMemo(b), g, 100, 10); !errors.Is(err, matching.ErrStale) {
			t.Fatalf("ready mark after eviction: %v, want ErrStale", err)
		}
	}
	r.checkNoHalfState(t)
	objects := func() int {
		n := 0
		for _, err := range r.store.List(ctx, block.MemoComponentPrefix(r.key)) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	if n := objects(); n != 2 {
		t.Fatalf("%d objects after the late writes, want 2 orphans", n)
	}
	if n, err := r.ev.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before SweepAfter deleted %d (%v)", n, err)
	}
	// Block 1 is requested again (a read creates only missing entries;
	// make block 0's stay missing by creating block 1's alone).
	if err := r.f.Cache().SetMemo(matching.MemoEntry{Component: r.key, Block: blockref.ParseMemo(b1), State: matching.MemoPending,
		Object: block.MemoKey(r.key, blockref.ParseMemo(b1)), Gen: 7}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if n, err := r.ev.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep deleted %d objects (%v), want block 0's orphan", n, err)
	}
	if _, err := r.store.Stat(ctx, block.MemoKey(r.key, blockref.ParseMemo(b0))); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("block 0's orphan survived the sweep: %v", err)
	}
	if _, err := r.store.Stat(ctx, block.MemoKey(r.key, blockref.ParseMemo(b1))); err != nil {
		t.Errorf("block 1's object, named by a pending entry, was swept: %v", err)
	}
	if n, err := r.ev.Sweep(ctx); err != nil || n != 0 || r.ev.Swept() != 1 {
		t.Errorf("second sweep: %d (%v), %d in all", n, err, r.ev.Swept())
	}
}

// TestEvictionWithStoreDown: the object store fails in the middle of an
// eviction (after the entries are deleted). The eviction reports the
// error and is recorded in the audit log as failed; no entry is ready
// without its object (the read solution is pending, so nobody reads the
// objects left); and Sweep deletes those objects once the store is back.
func TestEvictionWithStoreDown(t *testing.T) {
	r := newRig(t, 3)
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	r.ev.Clock, r.ev.SweepAfter = clk, time.Minute
	for _, b := range r.blocks {
		r.work(t, b.Ref.ID())
	}
	r.minio.Kill()
	_, err := r.ev.Evict(ctx, eviction.Target{Components: []canon.Key{r.key}}, "alice", "bug")
	if err == nil {
		t.Fatal("eviction with the store down succeeded")
	}
	if err := r.minio.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r.checkNoHalfState(t)
	if ms, err := r.f.Cache().Memos(r.key); err != nil || len(ms) != 0 {
		t.Errorf("entries after the failed eviction: %v %v", ms, err)
	}
	a, err := r.f.Cache().Audit(10)
	if err != nil || len(a) != 1 || a[0].Who != "alice" || !strings.Contains(a[0].Why, "bug [failed after deleting 0 objects") {
		t.Errorf("audit after the failed eviction: %+v %v", a, err)
	}
	left := 0
	for _, err := range r.store.List(ctx, block.MemoComponentPrefix(r.key)) {
		if err != nil {
			t.Fatal(err)
		}
		left++
	}
	if left != len(r.blocks) {
		t.Fatalf("%d objects left, want %d", left, len(r.blocks))
	}
	clk.Advance(time.Minute)
	if n, err := r.ev.Sweep(ctx); err != nil || n != len(r.blocks) {
		t.Errorf("sweep deleted %d objects (%v), want %d", n, err, len(r.blocks))
	}
	sol, err := r.f.ReadSolution("ctr", "p", 0, 0)
	if err != nil || sol.Pending != len(r.blocks) {
		t.Errorf("solution after the failed eviction: %v %v", sol, err)
	}
}

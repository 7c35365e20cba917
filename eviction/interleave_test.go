package eviction_test

// Eviction interleaved step by step with reads and a worker, on a matching
// frontend and an evictor built directly (real Pebble, real MinIO), with
// hooks in the scheduler and the task canceler to stop each side at the
// point that matters.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/testenv"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
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
	hook  func(k matching.Key, block string)
}

func (s *hookSched) Enqueue(k matching.Key, block, client, pipeline string, prio int32) error {
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

func (c *hookCancel) Cancel(component, block string) error {
	if c.hook != nil {
		c.hook()
	}
	return nil
}

type rig struct {
	f      *matching.Frontend
	ev     *eviction.Evictor
	store  *objstore.Store
	sched  *hookSched
	cancel *hookCancel
	key    matching.Key
	blocks []matching.Block
}

func newRig(t *testing.T, nblocks int) *rig {
	t.Helper()
	m := testenv.NewMinIO(t)
	st, err := objstore.New(objstore.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	cache, err := matching.OpenCache(t.TempDir(), matching.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	r := &rig{store: st, sched: &hookSched{}, cancel: &hookCancel{}}
	fb := &fakeBlocks{}
	for i := range nblocks {
		fb.blocks = append(fb.blocks, matching.Block{ID: fmt.Sprintf("b%03d", i), RawObject: fmt.Sprintf("raw/ads/b%03d.arrow", i),
			MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99), Rows: 100})
	}
	r.blocks = fb.blocks
	r.f = matching.NewFrontend(matching.FrontendConfig{Cache: cache, Blocks: fb, Scheduler: r.sched,
		Schema: func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil }})
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
	gen, ok, err := r.f.Begin(r.key, block)
	if err != nil || !ok {
		t.Fatalf("begin %s: %v %v", block, ok, err)
	}
	r.write(t, block)
	if err := r.f.MarkReady(r.key, block, gen, 100, 10); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) write(t *testing.T, block string) {
	t.Helper()
	if _, err := r.store.Put(context.Background(), matching.MemoObjectKey(r.key, block), []byte("memo"), nil); err != nil {
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
	b0, b1 := r.blocks[0].ID, r.blocks[1].ID
	r.work(t, b0)
	r.work(t, b1)
	if _, err := r.ev.Evict(ctx, eviction.Target{Components: []matching.Key{r.key}}, "op", "first"); err != nil {
		t.Fatal(err)
	}

	readAtB0, releaseRead := make(chan struct{}), make(chan struct{})
	r.sched.hook = func(k matching.Key, block string) {
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
		_, err := r.ev.Evict(ctx, eviction.Target{Components: []matching.Key{r.key}}, "op", "second")
		evictDone <- err
	}()
	wait(t, evictorAtCancel, "the eviction to delete the entries")
	close(releaseRead)
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	// A worker picks block 1 up if the read created its entry.
	gen, pending, err := r.f.Begin(r.key, b1)
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
		if err := r.f.MarkReady(r.key, b1, gen, 100, 10); err != nil && !errors.Is(err, matching.ErrStale) {
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
		r.work(t, b.ID)
	}
	ch, cancel := r.f.Watch([]matching.Key{r.key})
	defer cancel()
	evictDone := make(chan error, 1)
	go func() {
		_, err := r.ev.Evict(context.Background(), eviction.Target{Components: []matching.Key{r.key}}, "op", "bug")
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

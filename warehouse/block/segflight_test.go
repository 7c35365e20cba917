package block

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

// NewTestStore returns a store on a fresh MinIO's bucket "warehouse" (the
// package's external tests use it too).
func NewTestStore(tb testing.TB) (*devenv.MinIO, *objstore.Store) {
	tb.Helper()
	m := devenv.NewMinIO(tb)
	s := m.NewStore(tb, objstore.Config{Bucket: "warehouse"})
	return m, s
}

// flightBlock writes a block of event_id and price to s.
func flightBlock(t *testing.T, s interface {
	objstore.Reader
	objstore.Writer
}) (arrow.Record, Meta) {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "event_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for i := range 5000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Float64Builder).Append(float64(i) / 7)
	}
	rec := b.NewRecord()
	t.Cleanup(rec.Release)
	meta, err := Write(context.Background(), s, Meta{Key: RawKey("ads", blockref.New("b1", 1)), ID: "b1", Source: "ads", SchemaFingerprint: "fp"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return rec, meta
}

// TestSegmentCacheFetchesOnce: readers missing the same segments at once
// fetch each of them once between them, and all get the right columns.
// The readers overlap the fetch under way because it takes as long as a
// request to MinIO does.
func TestSegmentCacheFetchesOnce(t *testing.T) {
	_, s := NewTestStore(t)
	rec, meta := flightBlock(t, s)
	c := NewSegmentCache(64 << 20)
	const readers = 8
	var wg sync.WaitGroup
	errs := make([]error, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := ReadColumnsCached(context.Background(), s, meta, []string{"price"}, c)
			if err == nil {
				if !array.Equal(got.Column(1), rec.Column(1)) || !array.Equal(got.Column(0), rec.Column(0)) {
					err = errFlight("columns differ")
				}
				got.Release()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Misses != 2 || st.Hits != 2*(readers-1) {
		t.Errorf("stats %+v: want 2 misses (event_id and price fetched once) and %d hits", st, 2*(readers-1))
	}
}

type errFlight string

func (e errFlight) Error() string { return string(e) }

// TestSegmentCacheWaiterRefetches: a reader waiting for another's fetch of
// a segment fetches it itself when that fetch fails (its task cancelled,
// say), instead of failing too. The test orders the fetch and the wait
// itself: it is about the cache's logic, on a bucket in memory.
func TestSegmentCacheWaiterRefetches(t *testing.T) {
	s := memstore.New()
	rec, meta := flightBlock(t, s)
	c := NewSegmentCache(64 << 20)
	col, _ := meta.Column("price")
	k := keyOf(meta.Key, col)
	if _, _, own := c.lookup(k); !own {
		t.Fatal("the first lookup should own the fetch")
	}
	done := make(chan error, 1)
	go func() {
		got, err := ReadColumnsCached(context.Background(), s, meta, []string{"price"}, c)
		if err == nil {
			if !array.Equal(got.Column(1), rec.Column(1)) {
				err = errFlight("price differs")
			}
			got.Release()
		}
		done <- err
	}()
	// Wait until the reader waits for the registered fetch, then fail it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c.mu.Lock()
		w := c.inflight[k].waiters
		c.mu.Unlock()
		if w == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader never waited for the fetch under way")
		}
		time.Sleep(time.Millisecond)
	}
	c.land(k, nil)
	if err := <-done; err != nil {
		t.Fatalf("a waiter failed with the fetch it waited for: %v", err)
	}
}

package block_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

// countingStore counts the reads made through it, by method.
type countingStore struct {
	*memstore.Store
	mu    sync.Mutex
	calls map[string]int
}

func newCountingStore() *countingStore {
	return &countingStore{Store: memstore.New(), calls: map[string]int{}}
}

func (c *countingStore) count(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

// requests returns the reads made since the last call, by method, and
// their total.
func (c *countingStore) requests() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, n := c.calls, 0
	for _, v := range out {
		n += v
	}
	c.calls = map[string]int{}
	return out, n
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	c.count("Get")
	return c.Store.Get(ctx, key)
}

func (c *countingStore) GetRangeInto(ctx context.Context, key string, off int64, dst []byte, filled func(lo, hi int)) error {
	c.count("GetRangeInto")
	return c.Store.GetRangeInto(ctx, key, off, dst, filled)
}

func (c *countingStore) GetFromInto(ctx context.Context, key string, off, max int64, alloc func(int) []byte, filled func(lo, hi int)) ([]byte, objstore.Info, error) {
	c.count("GetFromInto")
	return c.Store.GetFromInto(ctx, key, off, max, alloc, filled)
}

func (c *countingStore) GetSuffixInto(ctx context.Context, key string, dst []byte) (int, objstore.Info, error) {
	c.count("GetSuffixInto")
	return c.Store.GetSuffixInto(ctx, key, dst)
}

// all wants the named columns, whatever the footer.
func all(names ...string) func(block.Meta, bool) ([]string, error) {
	return func(block.Meta, bool) ([]string, error) { return names, nil }
}

// checkRead checks that d holds the named columns' segments as
// FetchSegments reads them.
func checkRead(t *testing.T, s objstore.Reader, d block.ObjectData, names []string) {
	t.Helper()
	want, err := block.FetchSegments(context.Background(), s, d.Meta, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		got, ok := d.Segment(n)
		if !ok || !bytes.Equal(got, want[i]) {
			t.Fatalf("column %s: read %v, same bytes as FetchSegments %v", n, ok, bytes.Equal(got, want[i]))
		}
	}
}

// TestObjectReaderRequests: a small object's columns are read with one
// request (the tail read holds the object); with its footer cached, with
// one ranged GET of the coalesced segments; a large object's with the
// tail read and one range for the segments before it, then one range;
// the columns are FetchSegments's bytes every time. Counted at the store.
func TestObjectReaderRequests(t *testing.T) {
	s := newCountingStore()
	ctx := context.Background()
	rec := testRecord(3000)
	defer rec.Release()
	small, err := block.Write(ctx, s, testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if small.Size > block.TailRead {
		t.Fatalf("small object is %d bytes, more than the tail read", small.Size)
	}
	big := testMeta()
	big.Key = "raw/ads/big.arrow"
	bigRec := testRecord(150_000)
	defer bigRec.Release()
	bigMeta, err := block.Write(ctx, s, big, bigRec)
	if err != nil {
		t.Fatal(err)
	}
	if bigMeta.Size < 4*block.TailRead {
		t.Fatalf("big object is %d bytes: not larger than the tail read", bigMeta.Size)
	}
	s.requests()

	names := []string{"event_id", "price", "ids"}
	r := &block.ObjectReader{Store: s, Footers: block.NewFooterCache(16)}
	var kinds []block.RequestKind
	read := func(key string, names []string) block.ObjectData {
		t.Helper()
		kinds = nil
		d, err := r.Read(ctx, block.ObjectRead{Key: key, Want: all(names...), Count: func(k block.RequestKind, _ int64) { kinds = append(kinds, k) }})
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, s, d, names)
		s.requests() // FetchSegments's
		return d
	}
	// Of the big object, the first two columns, far from its tail: the
	// tail read gives the footer, then one range holds both.
	first := []string{"event_id", "event_time"}
	for _, tc := range []struct {
		name   string
		key    string
		names  []string
		cached bool
		want   []block.RequestKind
	}{
		{"small, not cached", small.Key, names, false, []block.RequestKind{block.RequestTail}},
		{"small, cached", small.Key, names, true, []block.RequestKind{block.RequestRange}},
		{"big, not cached", bigMeta.Key, first, false, []block.RequestKind{block.RequestTail, block.RequestRange}},
		{"big, cached", bigMeta.Key, first, true, []block.RequestKind{block.RequestRange}},
	} {
		s.requests()
		d := read(tc.key, tc.names)
		if d.Cached != tc.cached {
			t.Errorf("%s: cached %v", tc.name, d.Cached)
		}
		if fmt.Sprint(kinds) != fmt.Sprint(tc.want) {
			t.Errorf("%s: requests %v, want %v", tc.name, kinds, tc.want)
		}
	}
	// Columns of the big object farther apart than the hole limit: one
	// request per coalesced range.
	spans, err := block.Spans(bigMeta, names)
	if err != nil || len(spans) < 2 {
		t.Fatalf("spans of %v: %d, %v", names, len(spans), err)
	}
	read(bigMeta.Key, names)
	if len(kinds) != len(spans) {
		t.Errorf("%v of the big object: %d requests, want one per coalesced range (%d)", names, len(kinds), len(spans))
	}

	// From: the last column read from its offset to the end, footer
	// included, in one request, though the object is large.
	last := bigMeta.Columns[len(bigMeta.Columns)-1]
	r2 := &block.ObjectReader{Store: s}
	s.requests()
	d, err := r2.Read(ctx, block.ObjectRead{Key: bigMeta.Key, Want: all(last.Name), From: last.Offset})
	if err != nil {
		t.Fatal(err)
	}
	if calls, n := s.requests(); n != 1 || calls["GetFromInto"] != 1 {
		t.Errorf("read from the last column's offset: %v", calls)
	}
	checkRead(t, s, d, []string{last.Name})
	// A From past the end: the tail read instead, the same bytes.
	s.requests()
	d, err = r2.Read(ctx, block.ObjectRead{Key: small.Key, Want: all("price"), From: bigMeta.Size})
	if err != nil {
		t.Fatal(err)
	}
	if calls, _ := s.requests(); calls["GetSuffixInto"] != 1 {
		t.Errorf("From past the end: %v", calls)
	}
	checkRead(t, s, d, []string{"price"})

	// A footer larger than the tail read is read on its own.
	r3 := &block.ObjectReader{Store: s, Limits: block.ReadLimits{Tail: 64}}
	kinds = nil
	d, err = r3.Read(ctx, block.ObjectRead{Key: small.Key, Want: all("price"), Count: func(k block.RequestKind, _ int64) { kinds = append(kinds, k) }})
	if err != nil {
		t.Fatal(err)
	}
	if want := []block.RequestKind{block.RequestTail, block.RequestFooter, block.RequestRange}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("a 64-byte tail read: %v, want %v", kinds, want)
	}
	checkRead(t, s, d, []string{"price"})
}

// TestObjectReaderStaleFooter: an object written again under its key
// after its footer was cached (a repaired memo object) is read right: the
// read with the old footer fails its checksums, the entry is dropped and
// the object read again uncached; a footer the caller refuses is read
// again too before the refusal stands; a footer damaged in place, the
// segments read unchanged, is noticed (the footer is read back with the
// column next to it); a missing object is ErrNotFound and leaves no
// entry. A corrupt segment read uncached is ErrCorrupt.
func TestObjectReaderStaleFooter(t *testing.T) {
	s := newCountingStore()
	ctx := context.Background()
	rec := testRecord(3000)
	defer rec.Release()
	meta, err := block.Write(ctx, s, testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	cache := block.NewFooterCache(16)
	r := &block.ObjectReader{Store: s, Footers: cache}
	names := []string{"query", "price"}
	if _, err := r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: all(names...)}); err != nil {
		t.Fatal(err)
	}
	// Rewritten with other rows: same columns, other bytes.
	other := testRecord(2500)
	defer other.Release()
	if _, err := block.Write(ctx, s, testMeta(), other); err != nil {
		t.Fatal(err)
	}
	d, err := r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: all(names...)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Cached || d.Meta.Rows != 2500 || cache.Stats().Stale != 1 {
		t.Fatalf("after a rewrite: cached %v, %d rows, stats %+v", d.Cached, d.Meta.Rows, cache.Stats())
	}
	checkRead(t, s, d, names)

	// The caller refuses the cached footer (as one that names another
	// block): the object is read again, and the fresh footer passes.
	stale := cache.Stats().Stale
	calls := 0
	want := func(m block.Meta, cached bool) ([]string, error) {
		calls++
		if cached {
			return nil, fmt.Errorf("not the block wanted: %w", block.ErrCorrupt)
		}
		return names, nil
	}
	if d, err = r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: want}); err != nil || d.Cached || calls != 2 || cache.Stats().Stale != stale+1 {
		t.Fatalf("refused cached footer: %v, cached %v, Want called %d times", err, d.Cached, calls)
	}
	// Refused again uncached: the refusal stands.
	refuse := func(block.Meta, bool) ([]string, error) { return nil, block.ErrCorrupt }
	if _, err := r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: refuse}); !errors.Is(err, block.ErrCorrupt) {
		t.Fatalf("refused footer: %v", err)
	}

	// The footer damaged in place, the segments as they were: a read from
	// the cached footer of the column next to it reads the footer back,
	// sees it changed, and the read from the object finds it corrupt.
	d, err = r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: all("ids")})
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := s.Get(ctx, meta.Key)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := blocktest.DamageFooter(data, blocktest.FooterDamage{Name: "rows", Field: `"rows":`, Rot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, meta.Key, bad, nil); err != nil {
		t.Fatal(err)
	}
	stale = cache.Stats().Stale
	if _, err := r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: all("ids")}); !errors.Is(err, block.ErrCorrupt) || cache.Stats().Stale != stale+1 {
		t.Fatalf("damaged footer read with the cached one: %v, stale %d", err, cache.Stats().Stale-stale)
	}
	if _, err := s.Put(ctx, meta.Key, data, nil); err != nil {
		t.Fatal(err)
	}

	if err := s.Delete(ctx, meta.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: all(names...)}); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("deleted object: %v", err)
	}
	s.requests()
	if _, err := r.Read(ctx, block.ObjectRead{Key: meta.Key, Want: all(names...)}); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("deleted object, again: %v", err)
	}
	if calls, _ := s.requests(); calls["GetSuffixInto"] != 1 || calls["GetRangeInto"] != 0 {
		t.Fatalf("a deleted object's footer stayed cached: %v", calls)
	}

	// A flipped byte in a segment the tail read holds.
	data, m2, err := block.Encode(testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m2.Column("price")
	data[c.Offset+5] ^= 1
	if _, err := s.Put(ctx, "raw/ads/bad.arrow", data, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, block.ObjectRead{Key: "raw/ads/bad.arrow", Want: all("price")}); !errors.Is(err, block.ErrCorrupt) {
		t.Fatalf("corrupt segment in the tail: %v", err)
	}
}

// TestFooterCacheBounded: the cache keeps at most its entries, the least
// recently used out first, and an object whose footer was evicted is read
// from its tail again.
func TestFooterCacheBounded(t *testing.T) {
	s := newCountingStore()
	ctx := context.Background()
	rec := testRecord(500)
	defer rec.Release()
	var keys []string
	for i := range 3 {
		m := testMeta()
		m.Key = fmt.Sprintf("raw/ads/b%d.arrow", i)
		if _, err := block.Write(ctx, s, m, rec); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, m.Key)
	}
	cache := block.NewFooterCache(2)
	r := &block.ObjectReader{Store: s, Footers: cache}
	read := func(key string) bool {
		d, err := r.Read(ctx, block.ObjectRead{Key: key, Want: all("price")})
		if err != nil {
			t.Fatal(err)
		}
		return d.Cached
	}
	read(keys[0])
	read(keys[1])
	if !read(keys[0]) { // keys[1] is now the least recent
		t.Fatal("footer of b0 not cached")
	}
	read(keys[2])
	if st := cache.Stats(); st.Entries != 2 {
		t.Fatalf("%d entries, bound 2", st.Entries)
	}
	if read(keys[1]) {
		t.Fatal("b1's footer was kept past the bound")
	}
	if read(keys[2]) != true {
		t.Fatal("b2's footer, read last but one, was not kept")
	}
	if block.NewFooterCache(0).Stats().Entries != 0 {
		t.Fatal("a cache of no entries")
	}
	var none *block.FooterCache
	if d, err := (&block.ObjectReader{Store: s, Footers: none}).Read(ctx, block.ObjectRead{Key: keys[0], Want: all("price")}); err != nil || d.Cached {
		t.Fatalf("nil cache: %v, cached %v", err, d.Cached)
	}
}

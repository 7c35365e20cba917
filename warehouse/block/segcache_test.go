package block_test

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

// checkColumns fails unless got holds event_id then names, each equal to
// want's column of that name.
func checkColumns(t *testing.T, want, got arrow.Record, names ...string) {
	t.Helper()
	names = append([]string{"event_id"}, names...)
	if int(got.NumCols()) != len(names) {
		t.Fatalf("%d columns, want %v", got.NumCols(), names)
	}
	for i, name := range names {
		if got.ColumnName(i) != name {
			t.Fatalf("column %d is %s, want %s", i, got.ColumnName(i), name)
		}
		if !array.Equal(want.Column(want.Schema().FieldIndices(name)[0]), got.Column(i)) {
			t.Fatalf("column %s differs", name)
		}
	}
}

// writeTestBlock stores testRecord(rows) in s. The segment cache's tests
// here give it a bucket in memory (memstore): they are about what the cache
// decides (what it serves without a request, what it evicts, what it keys
// an entry by), not about reading objects: those reads are
// TestWriteAndReadColumns' and TestFetchIntoCallerBuffers', on MinIO, and
// memstore reads as objstore does on MinIO (objstore's TestConformance).
// Readers overlapping a fetch under way need the latency of a real one
// (TestSegmentCacheFetchesOnce).
func writeTestBlock(t *testing.T, s objstore.Writer, rows int) (arrow.Record, block.Meta) {
	t.Helper()
	rec := testRecord(rows)
	t.Cleanup(rec.Release)
	meta, err := block.Write(context.Background(), s, testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return rec, meta
}

// TestSegmentCacheServesWithoutFetching: a column read once is served from
// the cache without a request (the object is deleted in between, so a
// fetch would fail), a column not cached is still fetched, and what comes
// back equals the stored record either way.
func TestSegmentCacheServesWithoutFetching(t *testing.T) {
	s := memstore.New()
	rec, meta := writeTestBlock(t, s, 2000)
	ctx := context.Background()
	c := block.NewSegmentCache(64 << 20)
	got, err := block.ReadColumnsCached(ctx, s, meta, []string{"tokens", "price"}, c)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns(t, rec, got, "tokens", "price")
	got.Release()
	// A second component reads price and query: price (and event_id) from
	// the cache, query from the store.
	got, err = block.ReadColumnsCached(ctx, s, meta, []string{"price", "query"}, c)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns(t, rec, got, "price", "query")
	got.Release()
	st := c.Stats()
	if st.Misses != 4 || st.Hits != 2 || st.Entries != 4 {
		t.Errorf("stats %+v: want 4 misses (event_id, tokens, price, query), 2 hits (event_id, price), 4 entries", st)
	}

	if err := s.Delete(ctx, meta.Key); err != nil {
		t.Fatal(err)
	}
	got, err = block.ReadColumnsCached(ctx, s, meta, []string{"query", "tokens"}, c)
	if err != nil {
		t.Fatalf("cached columns of a deleted object: %v", err)
	}
	checkColumns(t, rec, got, "query", "tokens")
	got.Release()
	if _, err := block.ReadColumnsCached(ctx, s, meta, []string{"ids"}, c); err == nil {
		t.Fatal("a column never read came back without its object")
	}
	// Without a cache, every read fetches.
	if _, err := block.ReadColumnsCached(ctx, s, meta, []string{"query"}, nil); err == nil {
		t.Fatal("a nil cache served a deleted object")
	}
}

// TestSegmentCacheBudget: the cache never holds more than its budget; the
// least recently used segments leave first, and a segment over the whole
// budget is not kept at all.
func TestSegmentCacheBudget(t *testing.T) {
	s := memstore.New()
	rec, meta := writeTestBlock(t, s, 2000)
	ctx := context.Background()
	size := func(name string) int64 {
		c, ok := meta.Column(name)
		if !ok {
			t.Fatalf("no column %s", name)
		}
		return c.Length
	}
	// Room for event_id and price, not for a third.
	budget := size("event_id") + size("price") + 1
	if size("event_time") > size("price") {
		t.Fatalf("test data: event_time (%d bytes) must fit where price (%d) did", size("event_time"), size("price"))
	}
	read := func(c *block.SegmentCache, cols ...string) {
		t.Helper()
		got, err := block.ReadColumnsCached(ctx, s, meta, cols, c)
		if err != nil {
			t.Fatal(err)
		}
		checkColumns(t, rec, got, cols...)
		got.Release()
	}
	c := block.NewSegmentCache(budget)
	read(c, "price")      // event_id, price
	read(c, "event_time") // event_id is used again; event_time pushes price out
	if st := c.Stats(); st.Entries != 2 || st.ResidentBytes > budget {
		t.Fatalf("%d entries of %d bytes, want 2 within %d", st.Entries, st.ResidentBytes, budget)
	}
	// A segment larger than the whole budget is served and not kept.
	small := block.NewSegmentCache(size("event_id") - 1)
	read(small, "price")
	if st := small.Stats(); st.Entries != 0 || st.ResidentBytes != 0 {
		t.Fatalf("a cache smaller than every segment holds %d of them", st.Entries)
	}

	if err := s.Delete(ctx, meta.Key); err != nil {
		t.Fatal(err)
	}
	read(c, "event_time") // still cached, with event_id
	if _, err := block.ReadColumnsCached(ctx, s, meta, []string{"price"}, c); err == nil {
		t.Fatal("price was served after it should have left the cache")
	}
}

// TestSegmentCacheRewrittenObject: an object rewritten with other bytes
// under the same key is read afresh, even where a column keeps its offset
// and length: entries are keyed by the column's directory entry, CRC-32C
// included, which the new footer changes.
func TestSegmentCacheRewrittenObject(t *testing.T) {
	s := memstore.New()
	first, m1 := writeTestBlock(t, s, 1000)
	ctx := context.Background()
	c := block.NewSegmentCache(64 << 20)
	got, err := block.ReadColumnsCached(ctx, s, m1, []string{"price"}, c)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns(t, first, got, "price")
	got.Release()

	// The same rows with other prices (same nulls): the price segment has
	// the same offset and length, other bytes.
	cols := slices.Clone(first.Columns())
	pi := first.Schema().FieldIndices("price")[0]
	old := cols[pi].(*array.Float64)
	pb := array.NewFloat64Builder(memory.DefaultAllocator)
	defer pb.Release()
	for i := range old.Len() {
		if old.IsNull(i) {
			pb.AppendNull()
		} else {
			pb.Append(old.Value(i) + 1)
		}
	}
	cols[pi] = pb.NewArray()
	defer cols[pi].Release()
	second := array.NewRecord(first.Schema(), cols, first.NumRows())
	defer second.Release()
	m2, err := block.Write(ctx, s, testMeta(), second)
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := m1.Column("price")
	c2, _ := m2.Column("price")
	if m1.Key != m2.Key || c1.Offset != c2.Offset || c1.Length != c2.Length || c1.CRC32C == c2.CRC32C {
		t.Fatalf("test: want the same key and segment place with another checksum: %+v, %+v", c1, c2)
	}
	got, err = block.ReadColumnsCached(ctx, s, m2, []string{"price"}, c)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns(t, second, got, "price")
	got.Release()
}

package catalog_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
)

const hour = int64(3600_000_000)

func meta(window int64, part int32, first, last int64, gen int64) block.Meta {
	kr := block.KafkaRange{Topic: "raw.ads", Partition: part, First: first, Last: last}
	id := block.ID(window, kr)
	return block.Meta{Format: 1, Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
		WindowStart: window, WindowLength: hour, MinEventTime: window + 10, MaxEventTime: window + hour - 10,
		Rows: last - first + 1, SchemaFingerprint: "fp", Kafka: &kr, Generation: gen}
}

// noSeq is m without the sequence number the catalog gave it.
func noSeq(m block.Meta) block.Meta { m.Seq = 0; return m }

func noSeqs(ms []block.Meta) []block.Meta {
	out := make([]block.Meta, len(ms))
	for i, m := range ms {
		out[i] = noSeq(m)
	}
	return out
}

func open(t *testing.T, dir string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ids(ms []block.Meta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestAddLookup(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	w := 1000 * hour
	blocks := []block.Meta{
		meta(w+2*hour, 0, 300, 399, 1),
		meta(w, 0, 0, 99, 1),
		meta(w, 1, 0, 49, 1),
		meta(w+hour, 0, 100, 299, 1),
		meta(w, 0, 150, 160, 1), // late block of window w, offsets interleaved with window w+1's
	}
	blocks[4].Late = true
	for _, m := range blocks {
		if err := c.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{blocks[1].ID, blocks[4].ID, blocks[2].ID, blocks[3].ID, blocks[0].ID}
	if !reflect.DeepEqual(ids(all), want) {
		t.Fatalf("event order:\n%v\nwant\n%v", ids(all), want)
	}
	got, err := c.Get("ads", blocks[4].ID)
	if err != nil || !reflect.DeepEqual(noSeq(got), blocks[4]) {
		t.Fatalf("get: %v %+v", err, got)
	}
	if _, err := c.Get("ads", "nope"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	for _, tc := range []struct {
		from, to int64
		want     []string
	}{
		{w, w + hour, []string{blocks[1].ID, blocks[4].ID, blocks[2].ID}},
		{w + hour - 15, w + hour + 20, []string{blocks[1].ID, blocks[4].ID, blocks[2].ID, blocks[3].ID}},
		{w + 3*hour, w + 4*hour, nil},
		{w - hour, w + 11, []string{blocks[1].ID, blocks[4].ID, blocks[2].ID}},
		{w + 2*hour, w + 100*hour, []string{blocks[0].ID}},
		{w, w, nil},
	} {
		got, err := c.Range("ads", tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(got), tc.want) {
			t.Errorf("Range(%d,%d) = %v, want %v", tc.from-w, tc.to-w, ids(got), tc.want)
		}
	}
	cov, err := c.Covered("raw.ads", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantCov := []catalog.Coverage{{w, 0, 99, blocks[1].ID, w + hour - 10}, {w, 150, 160, blocks[4].ID, w + hour - 10},
		{w + hour, 100, 299, blocks[3].ID, w + 2*hour - 10}, {w + 2*hour, 300, 399, blocks[0].ID, w + 3*hour - 10}}
	if !reflect.DeepEqual(cov, wantCov) {
		t.Fatalf("covered:\n%+v\nwant\n%+v", cov, wantCov)
	}
	if srcs, _ := c.Sources(); !reflect.DeepEqual(srcs, []string{"ads"}) {
		t.Fatalf("sources %v", srcs)
	}
}

func TestOverlapAndReplace(t *testing.T) {
	c := open(t, t.TempDir())
	w := 10 * hour
	if err := c.Add(meta(w, 0, 100, 199, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(meta(w, 0, 300, 399, 1)); err != nil {
		t.Fatal(err)
	}
	// Same id again: a re-sealed block replaces itself.
	again := meta(w, 0, 100, 199, 2)
	if err := c.Add(again); err != nil {
		t.Fatalf("re-adding the same block: %v", err)
	}
	if got, _ := c.Get("ads", again.ID); got.Generation != 2 {
		t.Fatalf("replace kept generation %d", got.Generation)
	}
	for _, r := range [][2]int64{{150, 250}, {50, 100}, {199, 199}, {0, 1000}, {250, 300}} {
		if err := c.Add(meta(w, 0, r[0], r[1], 3)); !errors.Is(err, catalog.ErrOverlap) {
			t.Errorf("range %v in window w: %v, want ErrOverlap", r, err)
		}
	}
	// The same offsets in another window or partition are other records.
	for _, m := range []block.Meta{meta(w+hour, 0, 150, 250, 3), meta(w, 1, 150, 250, 3), meta(w, 0, 200, 299, 3)} {
		if err := c.Add(m); err != nil {
			t.Errorf("non-overlapping %s: %v", m.ID, err)
		}
	}
	bad := meta(w, 2, 0, 1, 1)
	bad.WindowLength = 2 * hour
	if err := c.Add(bad); !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("window length change: %v, want ErrConflict", err)
	}
	if err := c.Remove("ads", again.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(meta(w, 0, 150, 250, 4)); !errors.Is(err, catalog.ErrOverlap) {
		t.Fatalf("after remove, [150,250] still overlaps [200,299]: %v", err)
	}
	if err := c.Add(meta(w, 0, 100, 199, 4)); err != nil {
		t.Fatalf("after remove: %v", err)
	}
}

func TestPersistenceAndFormat(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	m := meta(0, 0, 0, 9, 1)
	if err := c.Add(m); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 3; want++ {
		if g, err := c.NextGeneration(); err != nil || g != want {
			t.Fatalf("generation %d, %v; want %d", g, err, want)
		}
	}
	c.Close()
	c = open(t, dir)
	if g, _ := c.Generation(); g != 3 {
		t.Fatalf("generation after reopen %d", g)
	}
	if got, err := c.Get("ads", m.ID); err != nil || !reflect.DeepEqual(noSeq(got), m) {
		t.Fatalf("after reopen: %v", err)
	}
	c.Close()
	db, err := pebble.Open(dir, &pebble.Options{Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("sig.catalog.format"), []byte("99"), pebble.Sync)
	db.Close()
	if _, err := catalog.Open(dir); !errors.Is(err, catalog.ErrFormat) {
		t.Fatalf("open of another format: %v, want ErrFormat", err)
	}
}

func smallRecord(n int, t0 int64) arrow.Record {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "event_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "event_time", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int64Builder).Append(t0 + int64(i))
	}
	return b.NewRecord()
}

// The catalog rebuilt from the bucket alone equals the original, and leaves
// out a block orphaned by a crashed generation (object written, never
// catalogued) whose records a later generation re-cut differently.
func TestRebuildEqualsOriginal(t *testing.T) {
	m := devenv.NewMinIO(t)
	store := m.NewStore(t, objstore.Config{Bucket: "warehouse"})
	ctx := context.Background()
	orig := open(t, filepath.Join(t.TempDir(), "orig"))
	w := 500 * hour
	write := func(mm block.Meta, catalogue bool) {
		t.Helper()
		rec := smallRecord(int(mm.Rows), mm.WindowStart+5)
		defer rec.Release()
		full, err := block.Write(ctx, store, mm, rec)
		if err != nil {
			t.Fatal(err)
		}
		if catalogue {
			if err := orig.Add(full); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Generation 1 crashed after writing [200,299] without cataloguing it.
	write(meta(w, 0, 0, 99, 1), true)
	write(meta(w, 0, 200, 299, 1), false)
	// Generation 2 re-cut those records as [100,249] and [250,320].
	write(meta(w, 0, 100, 249, 2), true)
	write(meta(w, 0, 250, 320, 2), true)
	late := meta(w, 1, 40, 60, 2)
	late.Late = true
	write(late, true)
	write(meta(w+hour, 1, 0, 39, 2), true)
	write(meta(w+hour, 0, 321, 400, 2), true)
	// An object that is not a block.
	if _, err := store.Put(ctx, "raw/ads/garbage.arrow", []byte("not a block"), nil); err != nil {
		t.Fatal(err)
	}

	want, _ := orig.Blocks("ads")
	dir := filepath.Join(t.TempDir(), "rebuilt")
	rebuilt, rep, err := catalog.Rebuild(ctx, store, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	got, _ := rebuilt.Blocks("ads")
	if !reflect.DeepEqual(noSeqs(got), noSeqs(want)) {
		t.Fatalf("rebuilt catalog:\n%v\nwant\n%v", ids(got), ids(want))
	}
	for _, p := range []int32{0, 1} {
		a, _ := orig.Covered("raw.ads", p)
		b, _ := rebuilt.Covered("raw.ads", p)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("partition %d coverage differs:\n%+v\n%+v", p, a, b)
		}
	}
	if rep.Blocks != len(want) || len(rep.Superseded) != 1 || rep.Superseded[0] != meta(w, 0, 200, 299, 1).Key ||
		len(rep.Unreadable) != 1 || rep.Generation != 2 {
		t.Fatalf("report %+v", rep)
	}
	if g, _ := rebuilt.Generation(); g != 2 {
		t.Fatalf("rebuilt generation %d", g)
	}
	if _, _, err := catalog.Rebuild(ctx, store, dir); err == nil {
		t.Fatal("rebuild into a non-empty directory succeeded")
	}
}

type nopLogger struct{}

func (nopLogger) Infof(string, ...any)      {}
func (nopLogger) Errorf(string, ...any)     {}
func (nopLogger) Fatalf(f string, a ...any) { panic(f) }

// TestDecodedEntriesAreCopies: block entries come out of a decode cache;
// what one caller does to its copy must not reach the next caller.
func TestDecodedEntriesAreCopies(t *testing.T) {
	c := open(t, t.TempDir())
	defer c.Close()
	m := meta(0, 0, 0, 99, 1)
	m.Columns = []block.Column{{Name: "query", Type: "string", Offset: 0, Length: 10, CRC32C: 7}}
	if err := c.Add(m); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := c.Get("ads", m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(noSeq(got), m) {
			t.Fatalf("Get = %+v, want %+v", got, m)
		}
		got.Columns[0].Name = "scribbled"
		got.Kafka.First = -1
		bs, err := c.Blocks("ads")
		if err != nil || len(bs) != 1 || !reflect.DeepEqual(noSeq(bs[0]), m) {
			t.Fatalf("Blocks = %+v, %v; want [%+v]", bs, err, m)
		}
		bs[0].Columns[0].Length = 0
	}
}

// TestRangeExtremes: ranges reaching to the ends of int64, or past the end
// of event time (the year 10000), find the blocks they cover. Before Range
// clamped to [transform.MinEventTime, transform.EndEventTime), the window
// of MinInt64 overflowed and a range ending in the year 10000 stopped at a
// window prefix with a five-digit year, which sorts before "2026…": both
// found no block.
func TestRangeExtremes(t *testing.T) {
	c := open(t, t.TempDir())
	defer c.Close()
	w2026 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	last := transform.EndEventTime - hour // the last window of event time
	blocks := []block.Meta{meta(w2026, 0, 0, 9, 1), meta(w2026+hour, 0, 10, 19, 1), meta(last, 0, 20, 29, 1)}
	for _, m := range blocks {
		if err := c.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	all := ids(blocks)
	y10000 := transform.EndEventTime
	for _, tc := range []struct {
		name     string
		from, to int64
		want     []string
	}{
		{"all of int64", math.MinInt64, math.MaxInt64, all},
		{"from MinInt64", math.MinInt64, w2026 + 2*hour, all[:2]},
		{"to the year 10000", w2026, y10000, all},
		{"past the year 10000", w2026, y10000 + 2*hour, all},
		{"the last window", last, y10000, all[2:]},
		{"before the epoch", math.MinInt64, 0, nil},
		{"after the end", y10000, math.MaxInt64, nil},
		{"the top of int64", math.MaxInt64 - 1, math.MaxInt64, nil},
	} {
		got, err := c.Range("ads", tc.from, tc.to)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(ids(got), tc.want) {
			t.Errorf("%s: Range(%d, %d) = %v, want %v", tc.name, tc.from, tc.to, ids(got), tc.want)
		}
	}
}

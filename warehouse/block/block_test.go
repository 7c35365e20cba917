package block_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// testRecord builds n rows with every column type, including nulls and
// empty lists.
func testRecord(n int) arrow.Record {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "event_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "event_time", Type: arrow.PrimitiveTypes.Int64},
		{Name: "query", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "tokens", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(1000 + i))
		b.Field(1).(*array.Int64Builder).Append(int64(1_700_000_000_000_000 + 37*i))
		if i%7 == 3 {
			b.Field(2).AppendNull()
			b.Field(3).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("query %d é", i))
			b.Field(3).(*array.Float64Builder).Append(float64(i) / 3)
		}
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		for j := range i % 4 {
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", j))
		}
		ib := b.Field(5).(*array.ListBuilder)
		ib.Append(true)
		for j := range i % 3 {
			ib.ValueBuilder().(*array.Int64Builder).Append(int64(i * j))
		}
	}
	return b.NewRecord()
}

func testMeta() block.Meta {
	kr := block.KafkaRange{Topic: "raw.ads", Partition: 2, First: 100, Last: 900}
	id := block.ID(1_699_999_200_000_000, kr)
	return block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
		WindowStart: 1_699_999_200_000_000, WindowLength: 3600_000_000,
		SchemaFingerprint: "fp", Kafka: &kr, Generation: 3}
}

func TestEncodeDecode(t *testing.T) {
	rec := testRecord(1000)
	defer rec.Release()
	data, meta, err := block.Encode(testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	data2, _, err := block.Encode(testMeta(), rec)
	if err != nil || !bytes.Equal(data, data2) {
		t.Fatal("Encode is not deterministic")
	}
	if meta.Rows != 1000 || len(meta.Columns) != 6 || meta.Size != int64(len(data)) ||
		meta.MinEventTime != 1_700_000_000_000_000 || meta.MaxEventTime != 1_700_000_000_000_000+37*999 {
		t.Fatalf("meta %+v", meta)
	}
	// Encode builds the object's checksum from its segments' (objstore.ChecksumCombine).
	if sum := objstore.Checksum(data); meta.Checksum != sum {
		t.Fatalf("meta.Checksum %08x, want %08x", meta.Checksum, sum)
	}
	m2, got, err := block.Decode(meta.Key, data)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !reflect.DeepEqual(m2, meta) {
		t.Fatalf("decoded meta\n%+v\nwant\n%+v", m2, meta)
	}
	for i := range rec.NumCols() {
		if !array.Equal(rec.Column(int(i)), got.Column(int(i))) {
			t.Fatalf("column %s differs after round trip", rec.ColumnName(int(i)))
		}
	}
}

func TestIDsSortInEventOrder(t *testing.T) {
	hour := int64(3600_000_000)
	ids := []string{
		block.ID(5*hour, block.KafkaRange{Partition: 0, First: 10, Last: 20}),
		block.ID(5*hour, block.KafkaRange{Partition: 0, First: 21, Last: 9000}),
		block.ID(5*hour, block.KafkaRange{Partition: 1, First: 0, Last: 5}),
		block.ID(6*hour, block.KafkaRange{Partition: 0, First: 3, Last: 4}),
		block.ID(100000*hour, block.KafkaRange{Partition: 0, First: 3, Last: 4}),
	}
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			t.Fatalf("ids out of order: %s >= %s", ids[i-1], ids[i])
		}
	}
	src, id, ok := block.ParseRawKey(block.RawKey("ads", blockref.New(ids[0], 1)))
	if !ok || src != "ads" || id != blockref.New(ids[0], 1) {
		t.Fatalf("ParseRawKey: %q %q %v", src, id, ok)
	}
	for _, bad := range []string{"raw/ads.arrow", "memo/k/x.arrow", "raw/a/b/c.arrow", "raw//x.arrow", "raw/a/x.parquet"} {
		if _, _, ok := block.ParseRawKey(bad); ok {
			t.Errorf("ParseRawKey(%q) accepted", bad)
		}
	}
}

func newStore(t testing.TB) (*devenv.MinIO, *objstore.Store) {
	t.Helper()
	return block.NewTestStore(t)
}

func TestWriteAndReadColumns(t *testing.T) {
	_, s := newStore(t)
	rec, meta := writeTestBlock(t, s, 5000)
	ctx := context.Background()
	m2, full, err := block.ReadBlock(ctx, s, meta.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Release()
	if full.NumCols() != 6 || full.NumRows() != 5000 || m2.Checksum != meta.Checksum {
		t.Fatalf("full read: %d cols %d rows", full.NumCols(), full.NumRows())
	}
	footer, err := block.ReadFooter(ctx, s, meta.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(footer, meta) {
		t.Fatalf("footer meta\n%+v\nwant\n%+v", footer, meta)
	}
	for _, withDir := range []bool{true, false} {
		m := meta
		if !withDir {
			m = block.Meta{Key: meta.Key} // only the key: the footer is read first
		}
		before := s.Stats().BytesRead
		got, err := block.ReadColumns(ctx, s, m, []string{"tokens", "price"})
		if err != nil {
			t.Fatal(err)
		}
		moved := s.Stats().BytesRead - before
		if got.NumCols() != 3 || got.ColumnName(0) != "event_id" || got.ColumnName(1) != "tokens" || got.ColumnName(2) != "price" {
			t.Fatalf("columns %v", got.Schema())
		}
		for i, name := range []string{"event_id", "tokens", "price"} {
			idx := rec.Schema().FieldIndices(name)[0]
			if !array.Equal(rec.Column(idx), got.Column(i)) {
				t.Fatalf("column %s differs", name)
			}
		}
		// Segments within the hole limit of each other are fetched with
		// one GET (FetchSegments, Spans), so the holes between them come
		// along; never more than that.
		spans, err := block.Spans(meta, []string{"event_id", "tokens", "price"})
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		for _, sp := range spans {
			want += sp.End - sp.Off
		}
		if withDir && moved != want {
			t.Fatalf("moved %d bytes, want the coalesced ranges of the three segments (%d)", moved, want)
		}
		if moved >= meta.Size {
			t.Fatalf("reading 3 of 6 columns moved %d bytes of %d", moved, meta.Size)
		}
		got.Release()
	}
	if _, err := block.ReadColumns(ctx, s, meta, []string{"nope"}); !errors.Is(err, block.ErrNoColumn) {
		t.Fatalf("unknown column: %v", err)
	}
}

// A column segment changed after writing (the object rewritten with a valid
// whole-object checksum, so only the footer's per-column CRC can catch it)
// is detected by ranged reads and full reads alike, naming the object and
// the column; other columns stay readable.
func TestCorruptColumn(t *testing.T) {
	_, s := newStore(t)
	_, meta := writeTestBlock(t, s, 2000)
	ctx := context.Background()
	data, _, err := s.Get(ctx, meta.Key)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := meta.Column("query")
	data[q.Offset+q.Length/2] ^= 0x40
	if _, err := s.Put(ctx, meta.Key, data, nil); err != nil {
		t.Fatal(err)
	}
	_, err = block.ReadColumns(ctx, s, meta, []string{"query"})
	if !errors.Is(err, block.ErrCorrupt) || !strings.Contains(err.Error(), meta.Key) || !strings.Contains(err.Error(), "query") {
		t.Fatalf("ranged read of corrupt column: %v", err)
	}
	if _, _, err := block.ReadBlock(ctx, s, meta.Key); !errors.Is(err, block.ErrCorrupt) {
		t.Fatalf("full read of corrupt block: %v", err)
	}
	if r, err := block.ReadColumns(ctx, s, meta, []string{"price"}); err != nil {
		t.Fatalf("intact column: %v", err)
	} else {
		r.Release()
	}
}

func TestDecodeRejectsDamage(t *testing.T) {
	rec := testRecord(300)
	defer rec.Release()
	data, meta, err := block.Encode(testMeta(), rec)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":        {},
		"truncated":    data[:len(data)-5],
		"no trailer":   data[:meta.FooterOffset],
		"footer flip":  flip(data, meta.FooterOffset+3),
		"segment flip": flip(data, meta.Columns[1].Offset+20),
		"magic":        flip(data, int64(len(data)-1)),
		"length":       flip(data, int64(len(data)-block.TrailerSize+2)),
	}
	for name, b := range cases {
		if _, _, err := block.Decode("k", b); !errors.Is(err, block.ErrCorrupt) || !strings.Contains(err.Error(), "k") {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// Every single-byte flip anywhere is caught (sampled).
	for off := int64(0); off < int64(len(data)); off += 97 {
		if _, r, err := block.Decode("k", flip(data, off)); err == nil {
			r.Release()
			t.Fatalf("flip at %d not detected", off)
		}
	}
}

func flip(b []byte, off int64) []byte {
	c := bytes.Clone(b)
	c[off] ^= 0x01
	return c
}

func TestMemoKeyLayout(t *testing.T) {
	k := canon.Key{0xab, 0xc1}
	want := "memo/abc1" + strings.Repeat("0", 60) + "/id1.arrow"
	if got := block.MemoKey(k, blockref.ParseMemo("id1")); got != want {
		t.Fatalf("MemoKey = %q, want %q", got, want)
	}
	if p := block.MemoComponentPrefix(k); !strings.HasPrefix(want, p) || !strings.HasSuffix(p, "/") {
		t.Fatalf("MemoComponentPrefix = %q", p)
	}
	if got := block.CheckpointKey("p", "e1/state"); got != "checkpoints/p/e1/state" {
		t.Fatal(got)
	}
	if err := block.ValidateName("source", "a/b"); err == nil {
		t.Fatal("slash accepted")
	}
	_ = transform.AdsSchema
}

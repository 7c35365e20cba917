package block_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/warehouse/block"
)

// FetchSegmentsInto fetches into the caller's buffers, whatever they
// held: the segments and the arrays DecodeSegment decodes alias them, the
// checksums are verified all the same, and a buffer of the wrong size is
// refused.
func TestFetchIntoCallerBuffers(t *testing.T) {
	_, s := newStore(t)
	rec, meta := writeTestBlock(t, s, 3000)
	ctx := context.Background()
	var mu sync.Mutex
	var bufs [][]byte
	dirty := func(n int) []byte {
		b := bytes.Repeat([]byte{0xA5}, n)
		mu.Lock()
		bufs = append(bufs, b)
		mu.Unlock()
		return b
	}
	names := []string{"price", "event_id", "tokens"}
	segs, err := block.FetchSegmentsInto(ctx, s, meta, names, dirty)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := block.FetchSegments(ctx, s, meta, names)
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		if !bytes.Equal(segs[i], plain[i]) || !within(segs[i], bufs) {
			t.Fatalf("segment %s: equal %v, in a caller's buffer %v", names[i], bytes.Equal(segs[i], plain[i]), within(segs[i], bufs))
		}
	}

	for i, name := range names {
		c, _ := meta.Column(name)
		got, err := block.DecodeSegment(meta.Key, c, segs[i], meta.Rows)
		if err != nil {
			t.Fatal(err)
		}
		idx := rec.Schema().FieldIndices(name)[0]
		if !array.Equal(rec.Column(idx), got) {
			t.Fatalf("column %s differs", name)
		}
		if name == "price" && !within(arrow.Float64Traits.CastToBytes(got.(*array.Float64).Float64Values()), bufs) {
			t.Fatal("decoded values are not a view of the caller's buffer")
		}
		got.Release()
	}

	// A wrong checksum in the directory is caught with dirty buffers too.
	bad := meta
	bad.Columns = append([]block.Column(nil), meta.Columns...)
	for i := range bad.Columns {
		if bad.Columns[i].Name == "tokens" {
			bad.Columns[i].CRC32C ^= 1
		}
	}
	if _, err := block.FetchSegmentsInto(ctx, s, bad, names, dirty); !errors.Is(err, block.ErrCorrupt) {
		t.Fatalf("wrong CRC: %v, want ErrCorrupt", err)
	}
	short := func(n int) []byte { return make([]byte, n-1) }
	if _, err := block.FetchSegmentsInto(ctx, s, meta, names, short); err == nil {
		t.Fatal("short buffer accepted")
	}
}

func within(seg []byte, bufs [][]byte) bool {
	for _, b := range bufs {
		lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(len(b))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(seg)))
		if len(seg) > 0 && p >= lo && p+uintptr(len(seg)) <= hi {
			return true
		}
	}
	return false
}

// A footer larger than the first probe takes a second request; the probes
// then grow so that the next such footer takes one.
func TestReadFooterLarge(t *testing.T) {
	_, s := newStore(t)
	ctx := context.Background()
	var fields []arrow.Field
	for i := range 300 {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("a_rather_long_column_name_%04d", i), Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	fields[0].Name = "event_id"
	sch := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for i := range fields {
		b.Field(i).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecord()
	defer rec.Release()
	var metas []block.Meta
	for i := range 2 {
		m := testMeta()
		m.Key = fmt.Sprintf("raw/ads/wide-%d.arrow", i)
		meta, err := block.Write(ctx, s, m, rec)
		if err != nil {
			t.Fatal(err)
		}
		if meta.FooterLength <= 8<<10 {
			t.Fatalf("footer of %d bytes; the test wants one larger than the first probe (8 KiB)", meta.FooterLength)
		}
		metas = append(metas, meta)
	}
	for i, meta := range metas {
		before := s.Stats().Requests
		got, err := block.ReadFooter(ctx, s, meta.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, meta) {
			t.Fatalf("footer %d differs", i)
		}
		if n := s.Stats().Requests - before; i == 1 && n != 1 {
			t.Fatalf("second wide footer took %d requests, want 1", n)
		}
	}
}

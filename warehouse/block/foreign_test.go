package block

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/transform"
)

// foreignSegment is an Arrow IPC file of one column, one record batch per
// array, as another program might write a segment.
func foreignSegment(t *testing.T, name string, opts []ipc.Option, arrays ...arrow.Array) []byte {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{{Name: name, Type: arrays[0].DataType(), Nullable: true}}, nil)
	b := &writeSeeker{}
	w, err := ipc.NewFileWriter(b, append([]ipc.Option{ipc.WithSchema(sch)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arrays {
		rec := array.NewRecord(sch, []arrow.Array{a}, int64(a.Len()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.buf
}

// TestDecodeSegmentForeign: a segment another writer laid out (a
// dictionary, large strings, several record batches, compressed buffers)
// decodes to the footer's type with the same values; one of no encoding of
// the footer's type, or not one column of the footer's rows, is ErrCorrupt
// naming what it holds.
func TestDecodeSegmentForeign(t *testing.T) {
	mem := memory.DefaultAllocator
	fromJSON := func(dt arrow.DataType, js string) arrow.Array {
		a, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	const js = `["shoes", null, "", "a string longer than twelve bytes", "shoes"]`
	want := fromJSON(arrow.BinaryTypes.String, js)
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	col := Column{Name: "query", Type: transform.String.String()}
	for name, seg := range map[string][]byte{
		"dictionary":     foreignSegment(t, "query", nil, fromJSON(dict, js)),
		"large_utf8":     foreignSegment(t, "query", nil, fromJSON(arrow.BinaryTypes.LargeString, js)),
		"string_view":    foreignSegment(t, "query", nil, fromJSON(arrow.BinaryTypes.StringView, js)),
		"two batches":    foreignSegment(t, "query", nil, array.NewSlice(want, 0, 2), array.NewSlice(want, 2, 5)),
		"zstd utf8":      foreignSegment(t, "query", []ipc.Option{ipc.WithZstd()}, want),
		"lz4 dictionary": foreignSegment(t, "query", []ipc.Option{ipc.WithLZ4()}, fromJSON(dict, js)),
	} {
		got, err := DecodeSegment("k", col, seg, 5)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !arrow.TypeEqual(got.DataType(), arrow.BinaryTypes.String) || !array.Equal(got, want) {
			t.Errorf("%s: decoded %s %v, want %v", name, got.DataType(), got, want)
		}
		got.Release()
	}
	for _, tc := range []struct {
		name string
		seg  []byte
		rows int64
		want string
	}{
		{"binary", foreignSegment(t, "query", nil, fromJSON(arrow.BinaryTypes.Binary, `["YQ=="]`)), 1,
			"column query: segment holds binary, footer says string"},
		{"dictionary of int64", foreignSegment(t, "query", nil, fromJSON(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8,
			ValueType: arrow.PrimitiveTypes.Int64}, `[1]`)), 1,
			"column query: segment holds dictionary<values=int64, indices=int8, ordered=false>, footer says string"},
		{"rows", foreignSegment(t, "query", nil, fromJSON(arrow.BinaryTypes.LargeString, js)), 4,
			"column query: segment of 5 rows, footer says 4"},
		{"not Arrow", []byte("ARROW1\x00\x00 and then nothing Arrow can read"), 1, "column query: segment"},
	} {
		_, err := DecodeSegment("k", col, tc.seg, tc.rows)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrCorrupt with %q", tc.name, err, tc.want)
		}
	}
}

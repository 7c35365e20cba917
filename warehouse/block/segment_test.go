package block

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/transform"
)

// segmentRecord has one column of every graph type, with nulls, null list
// elements dropped, empty strings and empty lists.
func segmentRecord(rows int) arrow.Record {
	r := rand.New(rand.NewPCG(1, 2))
	fields := []arrow.Field{{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64}}
	for _, t := range []transform.Type{transform.String, transform.Int64, transform.Float64, transform.ListString, transform.ListInt64} {
		fields = append(fields, arrow.Field{Name: "c_" + t.String(), Type: t.ArrowType(), Nullable: true})
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	words := []string{"", "a", "shoes", "ünïcode", "x y"}
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i + 1))
		null := func() bool { return r.IntN(5) == 0 }
		if s := b.Field(1).(*array.StringBuilder); null() {
			s.AppendNull()
		} else {
			s.Append(words[r.IntN(len(words))])
		}
		if v := b.Field(2).(*array.Int64Builder); null() {
			v.AppendNull()
		} else {
			v.Append(r.Int64())
		}
		if v := b.Field(3).(*array.Float64Builder); null() {
			v.AppendNull()
		} else {
			v.Append(r.NormFloat64())
		}
		if l := b.Field(4).(*array.ListBuilder); null() {
			l.AppendNull()
		} else {
			l.Append(true)
			for range r.IntN(4) {
				l.ValueBuilder().(*array.StringBuilder).Append(words[r.IntN(len(words))])
			}
		}
		if l := b.Field(5).(*array.ListBuilder); null() {
			l.AppendNull()
		} else {
			l.Append(true)
			for range r.IntN(4) {
				l.ValueBuilder().(*array.Int64Builder).Append(r.Int64N(100))
			}
		}
	}
	return b.NewRecord()
}

// TestDecodeSegmentZeroCopy: every column type written by Encode
// decodes without copying to the same values as Arrow's reader, at any row
// count, and decoding the array's buffers aliases the segment.
//
// Compressed segments (Arrow IPC buffer compression, LZ4 frame and ZSTD)
// decode by the same path to the same values, their buffers decompressed
// once into memory of their own; before, they took Arrow's reader
// (decodeForeign), which copies every buffer twice more.
func TestDecodeSegmentZeroCopy(t *testing.T) {
	for _, comp := range []Compression{Uncompressed, LZ4Frame, ZSTD} {
		t.Run(comp.Flag(), func(t *testing.T) { testDecodeSegmentZeroCopy(t, comp) })
	}
}

func testDecodeSegmentZeroCopy(t *testing.T, comp Compression) {
	for _, rows := range []int{1, 7, 1000} {
		rec := segmentRecord(rows)
		data, meta, err := EncodeWith(Meta{Key: "raw/t/b.arrow", ID: "b", Source: "t"}, rec, EncodeOptions{Compression: comp})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range meta.Columns {
			if c.Compression != comp {
				t.Fatalf("column %s: footer says compression %q, want %q", c.Name, c.Compression, comp)
			}
			seg := data[c.Offset : c.Offset+c.Length]
			typ, _ := transform.ParseType(c.Type)
			zc, ok := decodeZeroCopy(seg, typ, storedInt{}, meta.Rows, nil)
			if !ok {
				t.Fatalf("rows %d: column %s (%s) not decoded by the zero-copy path", rows, c.Name, c.Type)
			}
			ref, err := decodeArrow(seg, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !array.Equal(zc, ref) || !array.Equal(zc, rec.Column(i)) || zc.NullN() != rec.Column(i).NullN() {
				t.Fatalf("rows %d: column %s decodes to %v, want %v", rows, c.Name, zc, rec.Column(i))
			}
			got, err := DecodeSegment("k", c, seg, meta.Rows)
			if err != nil || !array.Equal(got, ref) {
				t.Fatalf("decodeSegment: %v", err)
			}
			if buf := zc.Data().Buffers()[1]; comp == Uncompressed && buf != nil && buf.Len() > 0 && &buf.Bytes()[0] != &seg[overlap(seg, buf.Bytes())] {
				t.Fatalf("column %s: buffer does not alias the segment", c.Name)
			}
			zc.Release()
			ref.Release()
			got.Release()
		}
		rec.Release()
	}
}

// decodeArrow decodes a segment with Arrow's IPC file reader, the reference.
func decodeArrow(seg []byte, name string) (arrow.Array, error) {
	r, err := ipc.NewFileReader(bytes.NewReader(seg), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.NumRecords() != 1 || r.Schema().NumFields() != 1 || r.Schema().Field(0).Name != name {
		return nil, fmt.Errorf("segment does not hold exactly column %s", name)
	}
	rec, err := r.RecordAt(0)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	col := rec.Column(0)
	col.Retain()
	return col, nil
}

// overlap returns the offset of b inside seg, or 0.
func overlap(seg, b []byte) int {
	for i := range seg {
		if &seg[i] == &b[0] {
			return i
		}
	}
	return 0
}

// TestDecodeSegmentNeverPanics flips bytes of segments (as a segment that
// passed its checksum but was written wrong might look) and requires an
// error or an array of the footer's type and length, never a panic.
func TestDecodeSegmentNeverPanics(t *testing.T) {
	for _, comp := range []Compression{Uncompressed, LZ4Frame, ZSTD} {
		t.Run(comp.Flag(), func(t *testing.T) { testDecodeSegmentNeverPanics(t, comp) })
	}
}

func testDecodeSegmentNeverPanics(t *testing.T, comp Compression) {
	rec := segmentRecord(50)
	defer rec.Release()
	data, meta, err := EncodeWith(Meta{Key: "raw/t/b.arrow", ID: "b", Source: "t"}, rec, EncodeOptions{Compression: comp})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range meta.Columns {
		for range 400 {
			seg := append([]byte(nil), data[c.Offset:c.Offset+c.Length]...)
			for range 1 + r.IntN(3) {
				seg[r.IntN(len(seg))] ^= byte(1 + r.IntN(255))
			}
			arr, err := DecodeSegment("k", c, seg, meta.Rows)
			if err == nil {
				want, _ := transform.ParseType(c.Type)
				if !arrow.TypeEqual(arr.DataType(), want.ArrowType()) || int64(arr.Len()) != meta.Rows {
					t.Fatalf("column %s: decoded %s of %d rows", c.Name, arr.DataType(), arr.Len())
				}
				arr.Release()
			}
		}
	}
}

// TestSpans: segments at most the hole limit apart share a GET, farther
// ones do not, a range grows only up to the range limit (a segment longer
// than it is a range of its own), every name keeps its index, and a
// missing column or a segment past the data is an error. Spans coalesces
// within the package's documented limits.
func TestSpans(t *testing.T) {
	const hole, rng = 1000, 5000
	lim := ReadLimits{Hole: hole, Range: rng}
	m := Meta{Key: "k", FooterOffset: 10 << 20, Columns: []Column{
		{Name: "a", Offset: 0, Length: 100},
		{Name: "b", Offset: 100 + hole, Length: 50},       // a hole of exactly the limit: merged
		{Name: "c", Offset: 150 + 2*hole + 1, Length: 10}, // one byte more: a range of its own
		{Name: "d", Offset: 9 << 20, Length: 1},
	}}
	spans, err := PlanSpans(m, []string{"c", "a", "b"}, lim)
	if err != nil {
		t.Fatal(err)
	}
	want := []Span{
		{Off: 0, End: 150 + hole, Members: []SpanMember{{1, m.Columns[0]}, {2, m.Columns[1]}}},
		{Off: 150 + 2*hole + 1, End: 160 + 2*hole + 1, Members: []SpanMember{{0, m.Columns[2]}}},
	}
	if !reflect.DeepEqual(spans, want) {
		t.Fatalf("spans\n%+v\nwant\n%+v", spans, want)
	}
	// The defaults: the same columns are one range under HoleLimit.
	if spans, err := Spans(m, []string{"c", "a", "b"}); err != nil || len(spans) != 1 || spans[0].End != 160+2*hole+1 {
		t.Fatalf("Spans with the default limits: %+v, %v", spans, err)
	}
	if _, err := PlanSpans(m, []string{"a", "x"}, lim); !errors.Is(err, ErrNoColumn) {
		t.Errorf("missing column: %v", err)
	}

	// The range limit: adjacent segments of 2000 bytes join while the
	// range stays within 5000 bytes; one of 6000 bytes is read alone.
	r := Meta{Key: "r", FooterOffset: 1 << 20, Columns: []Column{
		{Name: "p", Offset: 0, Length: 2000},
		{Name: "q", Offset: 2000, Length: 2000},
		{Name: "s", Offset: 4000, Length: 2000}, // 6000 with p and q: a new range
		{Name: "u", Offset: 6000, Length: 6000}, // longer than the limit
		{Name: "v", Offset: 12000, Length: 10},
	}}
	spans, err = PlanSpans(r, []string{"p", "q", "s", "u", "v"}, lim)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int64
	for _, sp := range spans {
		got = append(got, [2]int64{sp.Off, sp.End})
	}
	if want := [][2]int64{{0, 4000}, {4000, 6000}, {6000, 12000}, {12000, 12010}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("range limit %d: ranges %v, want %v", rng, got, want)
	}

	m.Columns[3].Length = 2 << 20 // past FooterOffset
	if _, err := Spans(m, []string{"d"}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("segment past the data: %v", err)
	}
	// Offset+Length would overflow, with and without a footer offset.
	m.Columns[3].Length = math.MaxInt64 - 100
	for _, fo := range []int64{0, 10 << 20} {
		m.FooterOffset = fo
		if _, err := Spans(m, []string{"d"}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("footer offset %d: overflowing segment: %v", fo, err)
		}
	}
}

// TestDecodeCompressedEdges: buffers a writer left uncompressed inside a
// compressed batch (length prefix -1, as Arrow writes buffers that do not
// shrink enough) decode by the zero-copy path; a buffer stating an
// uncompressed length far beyond what its rows need is ErrCorrupt before
// anything that large is allocated.
func TestDecodeCompressedEdges(t *testing.T) {
	rec := segmentRecord(1000)
	defer rec.Release()
	col := rec.Column(2) // int64, random: does not compress
	seg := foreignSegment(t, "c", []ipc.Option{ipc.WithZstd(), ipc.WithMinSpaceSavings(0.5)}, col)
	zc, ok := decodeZeroCopy(seg, transform.Int64, storedInt{}, 1000, nil)
	if !ok || !array.Equal(zc, col) {
		t.Fatalf("segment with uncompressed buffers: ok %v", ok)
	}
	zc.Release()

	seg = foreignSegment(t, "c", []ipc.Option{ipc.WithLZ4()}, col)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], 8000) // the values buffer's uncompressed length
	i := bytes.Index(seg, n[:])
	if i < 0 {
		t.Fatal("no length prefix 8000 in the segment")
	}
	binary.LittleEndian.PutUint64(seg[i:], 1<<40)
	_, err := DecodeSegment("k", Column{Name: "c", Type: "int64"}, seg, 1000)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("stated length 1 TiB: %v, want ErrCorrupt", err)
	}
}

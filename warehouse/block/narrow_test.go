package block

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/transform"
)

// int64Column is an int64 array of vals whose rows in nulls are null: their
// slots keep their values, as an array built from buffers may (a null
// slot's value is part of the bytes a reader serves).
func int64Column(vals []int64, nulls ...int) arrow.Array {
	var validity *memory.Buffer
	if len(nulls) > 0 {
		bits := make([]byte, bitutil.BytesForBits(int64(len(vals))))
		bitutil.SetBitsTo(bits, 0, int64(len(vals)), true)
		for _, i := range nulls {
			bitutil.ClearBit(bits, i)
		}
		validity = memory.NewBufferBytes(bits)
	}
	v := memory.NewBufferBytes(bytes.Clone(arrow.Int64Traits.CastToBytes(vals)))
	d := array.NewData(arrow.PrimitiveTypes.Int64, len(vals), []*memory.Buffer{validity, v}, nil, len(nulls), 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// listColumn is a list<int64> array of vals as elements (element 1 null
// when there are two or more): rows [vals[0]], null, [], [vals[1:]...].
func listColumn(vals []int64) arrow.Array {
	var elemNulls []int
	if len(vals) > 1 {
		elemNulls = []int{1}
	}
	child := int64Column(vals, elemNulls...)
	defer child.Release()
	offs := []int32{0, 1, 1, 1, int32(len(vals))}
	bits := []byte{0b1101}
	d := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int64), 4,
		[]*memory.Buffer{memory.NewBufferBytes(bits), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))},
		[]arrow.ArrayData{child.Data()}, 1, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func oneColumn(name string, a arrow.Array) arrow.Record {
	sch := arrow.NewSchema([]arrow.Field{{Name: name, Type: a.DataType(), Nullable: true}}, nil)
	return array.NewRecord(sch, []arrow.Array{a}, int64(a.Len()))
}

// sameBytes fails unless a and b hold the same bytes: type, length,
// offset, nulls, and each buffer over what the rows address (validity
// bits, values, offsets), children likewise. A widened column must be
// what the column decodes to when it was stored as declared, byte for
// byte, null slots included.
func sameBytes(t *testing.T, what string, a, b arrow.ArrayData) {
	t.Helper()
	if !arrow.TypeEqual(a.DataType(), b.DataType()) || a.Len() != b.Len() || a.Offset() != b.Offset() || a.NullN() != b.NullN() {
		t.Fatalf("%s: %s len %d off %d nulls %d, want %s len %d off %d nulls %d", what,
			a.DataType(), a.Len(), a.Offset(), a.NullN(), b.DataType(), b.Len(), b.Offset(), b.NullN())
	}
	n, off := a.Len(), a.Offset()
	get := func(d arrow.ArrayData, i, lo, hi int) []byte {
		buf := d.Buffers()[i]
		if buf == nil || hi <= lo {
			return nil
		}
		return buf.Bytes()[lo:hi]
	}
	if a.NullN() > 0 {
		for i := range n {
			if bitutil.BitIsSet(a.Buffers()[0].Bytes(), off+i) != bitutil.BitIsSet(b.Buffers()[0].Bytes(), off+i) {
				t.Fatalf("%s: validity of row %d differs", what, i)
			}
		}
	}
	if arrow.TypeEqual(a.DataType(), arrow.PrimitiveTypes.Int64) {
		if !bytes.Equal(get(a, 1, 8*off, 8*(off+n)), get(b, 1, 8*off, 8*(off+n))) {
			t.Fatalf("%s: values differ", what)
		}
		return
	}
	if !bytes.Equal(get(a, 1, 4*off, 4*(off+n+1)), get(b, 1, 4*off, 4*(off+n+1))) {
		t.Fatalf("%s: list offsets differ", what)
	}
	sameBytes(t, what+" elements", a.Children()[0], b.Children()[0])
}

// dirtyAlloc hands out memory full of garbage, as the reader's pooled unit
// buffers are: a widened buffer must write every byte it hands to the
// array.
func dirtyAlloc(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xDB
	}
	return b
}

// TestNarrowRoundTrip: an int64 column, and a list<int64> column's
// elements, are stored in the narrowest integer type that holds every
// value, at every width's boundary (one past it takes the next type), with
// the footer naming the stored type and keeping the declared one; the
// segment is an Arrow IPC file of the stored type that Arrow's own reader
// reads to the same values; and Decode, DecodeSegmentInto and the
// zero-copy decoder give back the declared type with the bytes the column
// decodes to when stored as declared (nulls, null slots' values, empty
// and null lists, null elements), compressed or not. Skipping the
// widening fails it: the segment holds int32, the reader must see int64.
func TestNarrowRoundTrip(t *testing.T) {
	const (
		minI32, maxI32 = math.MinInt32, math.MaxInt32
		maxU32         = math.MaxUint32
	)
	cases := []struct {
		name string
		vals []int64
		want string // stored type of the int64 column; "" as declared
	}{
		{"zero", []int64{0}, "int8"},
		{"int8", []int64{-128, 0, 127}, "int8"},
		{"int8 min-1", []int64{-129, 0}, "int16"},
		{"uint8", []int64{0, 128, 255}, "uint8"},
		{"uint8 max+1", []int64{0, 256}, "int16"},
		{"negative and 255", []int64{-1, 255}, "int16"},
		{"int16", []int64{-32768, 5, 32767}, "int16"},
		{"int16 min-1", []int64{-32769}, "int32"},
		{"uint16", []int64{0, 32768, 65535}, "uint16"},
		{"uint16 max+1", []int64{65536, 1}, "int32"},
		{"int32", []int64{minI32, 0, maxI32}, "int32"},
		{"hash buckets", []int64{0, 17, 1_000_002}, "int32"},
		{"int32 max+1", []int64{0, maxI32 + 1}, "uint32"},
		{"uint32", []int64{7, maxU32}, "uint32"},
		{"int32 min-1", []int64{minI32 - 1, 0}, ""},
		{"uint32 max+1", []int64{maxU32 + 1}, ""},
		{"negative and int32 max+1", []int64{-1, maxI32 + 1}, ""},
		{"int64", []int64{math.MinInt64, math.MaxInt64}, ""},
	}
	for _, comp := range []Compression{Uncompressed, LZ4Frame, ZSTD} {
		for _, tc := range cases {
			var nulls []int
			if len(tc.vals) > 1 {
				nulls = []int{1} // a null slot holding a value at the range's edge
			}
			for _, col := range []arrow.Array{int64Column(tc.vals, nulls...), listColumn(tc.vals)} {
				typ, _ := transform.TypeOfArrow(col.DataType())
				want := tc.want
				if want != "" && typ == transform.ListInt64 {
					want = "list<" + want + ">"
				}
				testNarrowColumn(t, comp.Flag()+" "+tc.name+" "+typ.String(), col, comp, want)
				col.Release()
			}
		}
	}
	// No values to narrow: as declared. All nulls: the nulls' zeros.
	empty := int64Column(nil)
	testNarrowColumn(t, "empty", empty, Uncompressed, "")
	empty.Release()
	allNull := int64Column(make([]int64, 5), 0, 1, 2, 3, 4)
	testNarrowColumn(t, "all null", allNull, LZ4Frame, "int8")
	allNull.Release()
}

func testNarrowColumn(t *testing.T, what string, col arrow.Array, comp Compression, want string) {
	t.Helper()
	rec := oneColumn("v", col)
	defer rec.Release()
	meta := Meta{Key: "memo/t/b.arrow", ID: "b", Source: "t"}
	plain, plainMeta, err := EncodeWith(meta, rec, EncodeOptions{Compression: comp})
	if err != nil {
		t.Fatal(err)
	}
	data, m, err := EncodeWith(meta, rec, EncodeOptions{Compression: comp, Narrow: []string{"v"}})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Columns[0]
	if c.Stored != want || c.Type != plainMeta.Columns[0].Type {
		t.Fatalf("%s: footer says type %s stored as %q, want %s stored as %q", what, c.Type, c.Stored, plainMeta.Columns[0].Type, want)
	}
	if want == "" && !bytes.Equal(data, plain) {
		t.Fatalf("%s: a column that does not narrow changed the object's bytes", what)
	}
	// Never larger (a buffer is padded to 8 bytes, so a few values take
	// as many bytes either way); a column of many values is smaller.
	if pc := plainMeta.Columns[0]; c.Length > pc.Length || c.Length == pc.Length && want != "" && col.Len() > 100 {
		t.Fatalf("%s: narrow segment of %d bytes, %d as declared", what, c.Length, pc.Length)
	}
	seg := data[c.Offset : c.Offset+c.Length]
	if got, _ := segmentType(seg); want != "" && got != want {
		t.Fatalf("%s: segment schema says %s, footer %s", what, got, want)
	}
	// Another Arrow implementation reads the stored type and the values.
	foreign, err := decodeArrow(seg, "v")
	if err != nil {
		t.Fatalf("%s: Arrow's reader: %v", what, err)
	}
	conformed, err := transform.ConformArray(transform.Field{Name: "v", Type: mustType(c.Type)}, foreign)
	if err != nil || !array.Equal(conformed, col) {
		t.Fatalf("%s: Arrow's reader reads %v (%v), want %v", what, foreign, err, col)
	}
	foreign.Release()
	conformed.Release()

	_, asDeclared, err := Decode(m.Key, plain)
	if err != nil {
		t.Fatal(err)
	}
	defer asDeclared.Release()
	_, got, err := Decode(m.Key, data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer got.Release()
	if !arrow.TypeEqual(got.Column(0).DataType(), col.DataType()) || !array.Equal(got.Column(0), col) {
		t.Fatalf("%s: decoded %s %v, want %s %v", what, got.Column(0).DataType(), got.Column(0), col.DataType(), col)
	}
	sameBytes(t, what, got.Column(0).Data(), asDeclared.Column(0).Data())
	into, err := DecodeSegmentInto(m.Key, c, seg, m.Rows, dirtyAlloc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	sameBytes(t, what+" (into)", into.Data(), asDeclared.Column(0).Data())
	into.Release()
	if want != "" {
		if zc, ok := decodeZeroCopy(seg, mustType(c.Type), storedInt{}, m.Rows, nil); ok {
			t.Fatalf("%s: a narrow segment decoded as declared, unwidened: %s", what, zc.DataType())
		}
	}
}

func mustType(s string) transform.Type {
	t, err := transform.ParseType(s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestNarrowSlices: a column that is a slice of a larger array (an
// offset; a list whose offsets do not start at 0; a list over a slice of
// its elements) narrows by the values it addresses (not those outside it)
// and round-trips to the slice's bytes.
func TestNarrowSlices(t *testing.T) {
	vals := make([]int64, 1000)
	for i := range vals {
		vals[i] = int64(i*37%5000) - 2000
	}
	vals[0], vals[999] = math.MaxInt64, math.MinInt64 // outside every slice below
	big := int64Column(vals, 3, 10, 500, 501)
	defer big.Release()
	ints := array.NewSlice(big, 2, 900)
	defer ints.Release()

	// A list over elements 1..998 of vals, two to a row, sliced.
	child := array.NewSlice(big, 1, 999)
	defer child.Release()
	offs := make([]int32, 0, 500)
	for i := 0; i <= 998; i += 2 {
		offs = append(offs, int32(i))
	}
	ld := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int64), len(offs)-1,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))}, []arrow.ArrayData{child.Data()}, 0, 0)
	list := array.MakeFromData(ld)
	ld.Release()
	defer list.Release()
	lists := array.NewSlice(list, 7, 300)
	defer lists.Release()

	for _, comp := range []Compression{Uncompressed, ZSTD} {
		testNarrowColumn(t, comp.Flag()+" int64 slice", ints, comp, "int16")
		testNarrowColumn(t, comp.Flag()+" list slice", lists, comp, "list<int16>")
	}
}

// TestNarrowOnlyNamedColumns: only the columns EncodeOptions.Narrow names
// narrow (a memo object's event_id stays the raw block's bytes), only
// int64 and list<int64> ones, and an object with none narrowed is byte
// for byte what Encode writes, with no "stored" in its footer.
func TestNarrowOnlyNamedColumns(t *testing.T) {
	rec := segmentRecord(300) // event_id 1..300, c_list<int64> elements < 100
	defer rec.Release()
	meta := Meta{Key: "memo/t/b.arrow", ID: "b", Source: "t"}
	plain, _, err := Encode(meta, rec)
	if err != nil {
		t.Fatal(err)
	}
	none, _, err := EncodeWith(meta, rec, EncodeOptions{Narrow: []string{"c_string", "c_float64", "c_list<string>", "c_int64"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(none, plain) || bytes.Contains(none, []byte(`"stored"`)) {
		t.Fatal("columns that do not narrow changed the object")
	}
	data, m, err := EncodeWith(meta, rec, EncodeOptions{Narrow: []string{"c_list<int64>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Columns {
		want := ""
		if c.Name == "c_list<int64>" {
			want = "list<int8>"
		}
		if c.Stored != want {
			t.Errorf("column %s stored as %q, want %q", c.Name, c.Stored, want)
		}
	}
	_, got, err := Decode(m.Key, data)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i := range rec.NumCols() {
		if !array.Equal(got.Column(int(i)), rec.Column(int(i))) {
			t.Errorf("column %s differs", rec.ColumnName(int(i)))
		}
	}
}

// TestNarrowStoredTypeChecked: a footer whose stored type does not widen
// to the declared type, or that the segment does not hold, is ErrCorrupt
// naming the column, from the footer (Decode, ReadFooter's parseFooter) as
// from DecodeSegment; a footer that lost its stored type still decodes
// (the segment is read as another encoding of int64, transform's
// conversion), and so does a narrow segment of several record batches
// (DecodeSegment's other path).
func TestNarrowStoredTypeChecked(t *testing.T) {
	col := int64Column([]int64{1, -5, 300, 7}, 2)
	defer col.Release()
	rec := oneColumn("v", col)
	defer rec.Release()
	data, m, err := EncodeWith(Meta{Key: "memo/t/b.arrow", ID: "b", Source: "t"}, rec, EncodeOptions{Narrow: []string{"v"}})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Columns[0]
	if c.Stored != "int16" {
		t.Fatalf("stored as %q", c.Stored)
	}
	seg := data[c.Offset : c.Offset+c.Length]
	for _, bad := range []struct{ typ, stored string }{
		{"int64", "int64"}, {"int64", "float32"}, {"int64", "list<int16>"}, {"int64", "uint64"},
		{"int64", "int8"}, {"int64", "int32"}, // widen, but the segment holds int16
		{"list<int64>", "int16"}, {"string", "int16"}, {"float64", "int16"}, {"list<string>", "list<int16>"},
	} {
		bc := c
		bc.Type, bc.Stored = bad.typ, bad.stored
		arr, err := DecodeSegment(m.Key, bc, seg, m.Rows)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "column v") {
			t.Errorf("%s stored as %s: %v, want ErrCorrupt naming column v", bad.typ, bad.stored, err)
		}
		if arr != nil {
			arr.Release()
		}
		// The same in the footer: refused as the footer is parsed.
		if bad.typ == "int64" {
			if _, _, err := Decode(m.Key, withStored(t, data, bad.stored)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "column v") {
				t.Errorf("footer storing int64 as %s: %v, want ErrCorrupt naming column v", bad.stored, err)
			}
		}
	}
	if _, _, err := Decode(m.Key, withStored(t, data, "float32")); err == nil || !strings.Contains(err.Error(), "does not widen") {
		t.Errorf("footer storing int64 as float32: %v", err)
	}

	lost := c
	lost.Stored = ""
	arr, err := DecodeSegment(m.Key, lost, seg, m.Rows)
	if err != nil || !array.Equal(arr, col) {
		t.Fatalf("footer without its stored type: %v %v", arr, err)
	}
	arr.Release()

	a, b := int64Column([]int64{1, -5}), int64Column([]int64{300, 7})
	defer a.Release()
	defer b.Release()
	narrowA, narrowB := narrowArray(a, arrow.PrimitiveTypes.Int16, storedInt{2, true}), narrowArray(b, arrow.PrimitiveTypes.Int16, storedInt{2, true})
	defer narrowA.Release()
	defer narrowB.Release()
	two := foreignSegment(t, "v", nil, narrowA, narrowB)
	arr, err = DecodeSegment(m.Key, Column{Name: "v", Type: "int64", Stored: "int16"}, two, 4)
	if err != nil || !arrow.TypeEqual(arr.DataType(), arrow.PrimitiveTypes.Int64) || arr.Len() != 4 ||
		arr.(*array.Int64).Value(2) != 300 || arr.(*array.Int64).Value(1) != -5 {
		t.Fatalf("narrow segment of two batches: %v %v", arr, err)
	}
	arr.Release()
}

// withStored is a whole object data with its first column's stored type
// in the footer replaced by stored, the footer's CRC-32C written to match
// (as a writer with a bug would).
func withStored(t *testing.T, data []byte, stored string) []byte {
	t.Helper()
	size := int64(len(data))
	flen, _, err := parseTrailer("k", data[size-TrailerSize:])
	if err != nil {
		t.Fatal(err)
	}
	foff := size - TrailerSize - flen
	var m Meta
	if err := json.Unmarshal(data[foff:size-TrailerSize], &m); err != nil {
		t.Fatal(err)
	}
	m.Columns[0].Stored = stored
	footer, err := footerJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(data[:foff]), footer...)
	var tr [TrailerSize]byte
	binary.LittleEndian.PutUint32(tr[0:], uint32(len(footer)))
	binary.LittleEndian.PutUint32(tr[4:], crc32.Checksum(footer, castagnoli))
	copy(tr[8:], Magic)
	return append(out, tr[:]...)
}

// TestDecodeNarrowNeverPanics: flipped bytes of narrow segments decode to
// the declared type and rows or are an error, never a panic.
func TestDecodeNarrowNeverPanics(t *testing.T) {
	for _, comp := range []Compression{Uncompressed, LZ4Frame} {
		rec := segmentRecord(50)
		data, meta, err := EncodeWith(Meta{Key: "memo/t/b.arrow", ID: "b", Source: "t"}, rec,
			EncodeOptions{Compression: comp, Narrow: []string{transform.ColEventID, "c_list<int64>"}})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range meta.Columns {
			if c.Stored == "" {
				continue
			}
			for i := range 600 {
				seg := bytes.Clone(data[c.Offset : c.Offset+c.Length])
				seg[(i*7919)%len(seg)] ^= byte(1 + i%255)
				if arr, err := DecodeSegment("k", c, seg, meta.Rows); err == nil {
					if !arrow.TypeEqual(arr.DataType(), mustType(c.Type).ArrowType()) || int64(arr.Len()) != meta.Rows {
						t.Fatalf("column %s: decoded %s of %d rows", c.Name, arr.DataType(), arr.Len())
					}
					arr.Release()
				}
			}
		}
	}
}

// BenchmarkDecodeNarrow is the widening's own cost: decoding a 10,000-row
// value segment stored wide (aliased, no copy) and narrow (widened into
// memory from an arena, as the reader's pooled unit buffers give it), per
// value decoded. The segments are checked and fetched elsewhere; fewer
// stored bytes to fetch and checksum is the other side of the trade
// (bench/narrow.sh measures both in a reader).
func BenchmarkDecodeNarrow(b *testing.B) {
	const rows = 10_000
	hashes := make([]int64, 0, 3*rows)
	offs := []int32{0}
	bins := make([]int64, rows)
	for i := range rows {
		for j := range i % 5 {
			hashes = append(hashes, int64((i*7919+j*104729)%1_000_003))
		}
		offs = append(offs, int32(len(hashes)))
		bins[i] = int64(i % 5)
	}
	child := int64Column(hashes)
	ld := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int64), rows,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))}, []arrow.ArrayData{child.Data()}, 0, 0)
	list := array.MakeFromData(ld)
	ld.Release()
	child.Release()
	ints := int64Column(bins)
	defer list.Release()
	defer ints.Release()
	arena := make([]byte, 0, 16<<20)
	alloc := func(n int) []byte {
		if len(arena)+n > cap(arena) {
			arena = arena[:0]
		}
		arena = arena[:len(arena)+n]
		return arena[len(arena)-n:]
	}
	for _, col := range []arrow.Array{list, ints} {
		values := col.Len()
		if l, ok := col.(*array.List); ok {
			values = l.ListValues().Len()
		}
		rec := oneColumn("v", col)
		for _, narrow := range []bool{false, true} {
			opts := EncodeOptions{}
			if narrow {
				opts.Narrow = []string{"v"}
			}
			data, m, err := EncodeWith(Meta{Key: "memo/t/b.arrow", ID: "b", Source: "t"}, rec, opts)
			if err != nil {
				b.Fatal(err)
			}
			c := m.Columns[0]
			seg := data[c.Offset : c.Offset+c.Length]
			name := c.Type
			if c.Stored != "" {
				name = c.Type + "-as-" + c.Stored
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					arena = arena[:0]
					arr, err := DecodeSegmentInto(m.Key, c, seg, m.Rows, alloc)
					if err != nil {
						b.Fatal(err)
					}
					arr.Release()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(values), "ns/value")
			})
		}
		rec.Release()
	}
}

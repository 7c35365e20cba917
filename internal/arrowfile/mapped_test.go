package arrowfile

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// mixedSchema has a column of every layout ReadColumns decodes or skips:
// fixed width, variable width, views (variadic buffers), dictionaries
// (read by Arrow's reader), structs, run-end encoding, lists.
var mixedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	{Name: "v", Type: arrow.BinaryTypes.StringView, Nullable: true},
	{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	{Name: "r", Type: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String), Nullable: true},
	{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "lv", Type: arrow.ListViewOf(arrow.BinaryTypes.LargeString), Nullable: true},
	{Name: "fl", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "u", Type: arrow.DenseUnionOf([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, []arrow.UnionTypeCode{0, 1})},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "n", Type: arrow.Null, Nullable: true},
}, nil)

// writeFile writes batches of JSON rows under sch to an Arrow IPC file and
// returns its path.
func writeFile(t *testing.T, sch *arrow.Schema, batches []string, opts ...ipc.Option) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.arrow")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, append([]ipc.Option{ipc.WithSchema(sch)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		rec := fromJSON(t, sch, b)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// mixedBatches: an empty batch, nulls in every nullable column, views
// longer than their 12 inline bytes. Dictionary columns hold indices into
// fixedDictionary (fromJSON): a file holds one dictionary per field.
var mixedBatches = []string{
	`[{"id": 1, "d": 0, "v": "a string longer than twelve bytes", "s": {"a": 1, "b": "p"}, "r": "q", "l": ["a", "b"], "f": 1.5,
	   "lv": ["e"], "fl": [1, 2], "m": [{"key": "k", "value": 1}], "u": [0, 7], "b": true, "n": null},
	  {"id": 2, "d": null, "v": null, "s": null, "r": "q", "l": null, "f": null,
	   "lv": null, "fl": null, "m": null, "u": [1, "t"], "b": null, "n": null},
	  {"id": 3, "d": 1, "v": "short", "s": {"a": 3, "b": null}, "r": "z", "l": [], "f": 3,
	   "lv": [], "fl": [3, null], "m": [], "u": [1, null], "b": false, "n": null}]`,
	`[]`,
	`[{"id": 4, "d": 1, "v": "another string of more than twelve", "s": {"a": 4, "b": "w"}, "r": null, "l": ["c"], "f": -0.5,
	   "lv": ["f", null, "g"], "fl": [5, 6], "m": [{"key": "j", "value": null}], "u": [0, -1], "b": true, "n": null},
	  {"id": 5, "d": 0, "v": "", "s": {"a": 5, "b": ""}, "r": "z", "l": ["d", null], "f": 0,
	   "lv": null, "fl": [7, 8], "m": null, "u": [0, null], "b": null, "n": null}]`,
}

var fixedDictionary = `["x", "y"]`

// fromJSON is the record of rows under sch, a dictionary column's values
// given as indices into fixedDictionary.
func fromJSON(t *testing.T, sch *arrow.Schema, rows string) arrow.Record {
	t.Helper()
	fields := sch.Fields()
	plain := make([]arrow.Field, len(fields))
	for i, f := range fields {
		plain[i] = f
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			plain[i].Type = dt.IndexType
		}
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, arrow.NewSchema(plain, nil), strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		cols[i] = rec.Column(i)
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			dict, _, err := array.FromJSON(memory.DefaultAllocator, dt.ValueType, strings.NewReader(fixedDictionary))
			if err != nil {
				t.Fatal(err)
			}
			defer dict.Release()
			cols[i] = array.NewDictionaryArray(dt, rec.Column(i), dict)
			defer cols[i].Release()
		}
	}
	return array.NewRecord(sch, cols, rec.NumRows())
}

// projected is what ReadFile reads of path, each batch projected to the
// columns named, as strings.
func projected(t *testing.T, path string, names []string) []string {
	t.Helper()
	var out []string
	err := ReadFile(path, func(_ int, rec arrow.Record) error {
		var b strings.Builder
		for j, f := range rec.Schema().Fields() {
			for _, n := range names {
				if n == f.Name {
					fmt.Fprintf(&b, "%s: %v\n", f.Name, rec.Column(j))
					break
				}
			}
		}
		out = append(out, b.String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadColumnsReadsWhatReadFileReads: over every selection of columns
// (in place, skipped, through Arrow's reader for dictionaries and
// compressed batches) ReadColumns gives each batch's named columns, in the
// file's order, with the values Arrow's own reader gives, and nothing else.
func TestReadColumnsReadsWhatReadFileReads(t *testing.T) {
	plain := writeFile(t, mixedSchema, mixedBatches)
	compressed := writeFile(t, mixedSchema, mixedBatches, ipc.WithZstd())
	for _, names := range [][]string{
		{"id"}, {"f", "id"}, {"v"}, {"s", "r"}, {"l", "f", "nope"}, {"d", "id"}, {},
		{"lv", "n"}, {"fl", "b"}, {"m"}, {"u", "id"}, {"b"},
		{"id", "d", "v", "s", "r", "l", "f", "lv", "fl", "m", "u", "b", "n"},
	} {
		for _, path := range []string{plain, compressed} {
			want := projected(t, path, names)
			var got []string
			err := ReadColumns(path, names, func(i int, rec arrow.Record) error {
				var b strings.Builder
				for j, f := range rec.Schema().Fields() {
					fmt.Fprintf(&b, "%s: %v\n", f.Name, rec.Column(j))
				}
				if i != len(got) {
					t.Errorf("batch %d after %d", i, len(got))
				}
				got = append(got, b.String())
				return nil
			})
			if err != nil {
				t.Fatalf("%v of %s: %v", names, filepath.Base(path), err)
			}
			if strings.Join(got, "--\n") != strings.Join(want, "--\n") {
				t.Errorf("%v (compressed %v):\n%s\nwant\n%s", names, path == compressed, strings.Join(got, "--\n"), strings.Join(want, "--\n"))
			}
		}
	}
}

// TestReadColumnsDoesNotCopy: reading one int64 column of a file whose
// other column is four times larger allocates a small fraction of either:
// the column is the file's bytes, the other never read. ReadFile allocates
// the whole file twice over (Arrow's reader copies the body, then each
// buffer).
func TestReadColumnsDoesNotCopy(t *testing.T) {
	const rows = 1 << 17
	sch := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "pad", Type: &arrow.FixedSizeBinaryType{ByteWidth: 32}}}, nil)
	p := filepath.Join(t.TempDir(), "big.arrow")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sch))
	if err != nil {
		t.Fatal(err)
	}
	pad := make([]byte, 32)
	for range 4 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for i := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.FixedSizeBinaryBuilder).Append(pad)
		}
		rec := b.NewRecord()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(p)
	measure := func(read func(fn func(int, arrow.Record) error) error) (uint64, int64) {
		var sum int64
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := read(func(_ int, rec arrow.Record) error {
			for j, f := range rec.Schema().Fields() {
				if f.Name == "a" {
					for _, v := range rec.Column(j).(*array.Int64).Int64Values() {
						sum += v
					}
				}
			}
			return nil
		})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		return after.TotalAlloc - before.TotalAlloc, sum
	}
	mapped, sum := measure(func(fn func(int, arrow.Record) error) error { return ReadColumns(p, []string{"a"}, fn) })
	copied, sum2 := measure(func(fn func(int, arrow.Record) error) error { return ReadFile(p, fn) })
	if want := int64(4 * rows * (rows - 1) / 2); sum != want || sum2 != want {
		t.Fatalf("sums %d and %d, want %d", sum, sum2, want)
	}
	t.Logf("file of %d bytes: ReadColumns allocated %d bytes, ReadFile %d", st.Size(), mapped, copied)
	if mapped > uint64(st.Size())/20 {
		t.Errorf("ReadColumns of one of two equal columns allocated %d bytes for a file of %d", mapped, st.Size())
	}
}

// batchMessage returns the offset in data of the first record batch's
// message flatbuffer and the checker over it.
func batchMessage(t *testing.T, data []byte) (int, *checker) {
	t.Helper()
	idx, err := checkFile(readerAt(data), int64(len(data)))
	if err != nil || len(idx.batches) == 0 {
		t.Fatalf("%v, %d batches", err, len(idx.batches))
	}
	blk := idx.batches[0]
	base := int(blk.offset) + 8 // after the continuation marker and the length
	return base, &checker{buf: data[base : blk.offset+blk.meta]}
}

type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, fmt.Errorf("read at %d of %d", off, len(r))
	}
	return copy(p, r[off:]), nil
}

// TestReadColumnsMalformedMetadata: every file ReadFile refuses,
// ReadColumns refuses with the same error; and a batch whose message lies
// about the nodes and buffers it reads in place is an error naming the
// file, the batch and the lie, not a crash.
func TestReadColumnsMalformedMetadata(t *testing.T) {
	for _, tc := range malformedFiles(t) {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadColumns(tc.path, []string{"id", "tags"}, func(int, arrow.Record) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error naming %s with %q", err, tc.path, tc.want)
			}
		})
	}
	good := validFile(t)
	for _, tc := range []struct {
		name  string
		spoil func(data []byte)
		want  string
	}{
		{"buffer beyond the body", func(data []byte) {
			base, c := batchMessage(t, data)
			rb, _ := c.table(c.root(), messageHeader)
			at := vectorAt(rb, base, batchBuffers) + 4 + 16 // the second buffer: id's values
			binary.LittleEndian.PutUint64(data[at:], 1<<40)
		}, "record batch 0: column \"id\": buffer 1 at 1099511627776 of 24 bytes in a body of"},
		{"buffer of negative length", func(data []byte) {
			base, c := batchMessage(t, data)
			rb, _ := c.table(c.root(), messageHeader)
			at := vectorAt(rb, base, batchBuffers) + 4 + 16 + 8
			binary.LittleEndian.PutUint64(data[at:], 1<<63)
		}, "record batch 0: column \"id\": buffer 1 at 0 of -9223372036854775808 bytes"},
		{"no field nodes", func(data []byte) {
			base, c := batchMessage(t, data)
			rb, _ := c.table(c.root(), messageHeader)
			binary.LittleEndian.PutUint32(data[vectorAt(rb, base, batchNodes):], 0)
		}, "record batch 0: column \"id\": field node 0 of 0"},
		{"more buffers than the message", func(data []byte) {
			base, c := batchMessage(t, data)
			rb, _ := c.table(c.root(), messageHeader)
			binary.LittleEndian.PutUint32(data[vectorAt(rb, base, batchBuffers):], 1<<28)
		}, "record batch 0: vector of 268435456 elements of 16 bytes"},
		{"rows beyond the buffers", func(data []byte) {
			base, c := batchMessage(t, data)
			rb, _ := c.table(c.root(), messageHeader)
			binary.LittleEndian.PutUint64(data[vectorAt(rb, base, batchNodes)+4:], 1<<40) // id's length
		}, "record batch 0: "},
		{"null count beyond the rows", func(data []byte) {
			base, c := batchMessage(t, data)
			rb, _ := c.table(c.root(), messageHeader)
			binary.LittleEndian.PutUint64(data[vectorAt(rb, base, batchNodes)+4+8:], 4) // id's null count
		}, "record batch 0: column \"id\": field node of 3 rows, 4 of them null"},
		{"not a record batch", func(data []byte) {
			base, c := batchMessage(t, data)
			msg := c.root()
			data[base+int(msg.Pos)+int(msg.Offset(messageHeaderType))] = 1 // a schema
		}, "record batch 0: message of type 1, not a record batch"},
		{"message table out of range", func(data []byte) {
			base, _ := batchMessage(t, data)
			binary.LittleEndian.PutUint32(data[base:], 1<<30)
		}, "record batch 0: table at 1073741824"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := append([]byte(nil), good...)
			tc.spoil(data)
			p := filepath.Join(t.TempDir(), "bad.arrow")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := ReadColumns(p, []string{"id", "tags"}, func(int, arrow.Record) error { return nil })
			if err == nil || !strings.Contains(err.Error(), p+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error naming %s with %q", err, p, tc.want)
			}
		})
	}
}

// TestReadColumnsSkipsColumnsNotNamed: a column not named is counted past,
// never read: a lie in its buffers does not stop the columns named, and
// is an error when it is named.
func TestReadColumnsSkipsColumnsNotNamed(t *testing.T) {
	data := validFile(t)
	base, c := batchMessage(t, data)
	rb, _ := c.table(c.root(), messageHeader)
	// tags's buffers follow id's validity and values: its validity (not
	// read, as nothing is null), then its offsets, the 4th.
	binary.LittleEndian.PutUint64(data[vectorAt(rb, base, batchBuffers)+4+3*16:], 1<<40)
	p := filepath.Join(t.TempDir(), "f.arrow")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var rows int64
	if err := ReadColumns(p, []string{"id"}, func(_ int, rec arrow.Record) error { rows += rec.NumRows(); return nil }); err != nil || rows != 6 {
		t.Fatalf("id alone: %d rows, %v", rows, err)
	}
	err := ReadColumns(p, []string{"tags"}, func(int, arrow.Record) error { return nil })
	if want := p + ": record batch 0: column \"tags\": buffer 3 at 1099511627776"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("tags: %v, want %q", err, want)
	}
}

// TestReadColumnsFileShrinks: a file truncated while it is mapped faults
// where its pages were; the fault is an error naming the file, not a
// crash (SIGBUS).
func TestReadColumnsFileShrinks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.arrow")
	if err := os.WriteFile(p, validFile(t), 0o644); err != nil {
		t.Fatal(err)
	}
	var sum int64
	err := ReadColumns(p, []string{"id"}, func(_ int, rec arrow.Record) error {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
		for _, v := range rec.Column(0).(*array.Int64).Int64Values() {
			sum += v
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), p+": changed while being read") {
		t.Fatalf("%v (sum %d), want the file named as changed", err, sum)
	}
}

// TestBufferAlignment: a buffer at an 8-byte aligned offset of the body is
// the body's bytes; one at another offset (the format forbids it; a writer
// may ignore that) is copied to an aligned allocation, since Arrow's arrays
// view a buffer as a slice of 8-byte values.
func TestBufferAlignment(t *testing.T) {
	body := make([]byte, 64)
	for i := range body {
		body[i] = byte(i)
	}
	addr := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	for _, off := range []int{8, 1, 12} {
		bufs := binary.LittleEndian.AppendUint64(nil, uint64(off))
		bufs = binary.LittleEndian.AppendUint64(bufs, 16)
		d := &decoder{body: body[8:], buffers: bufs} // body[8:] is 8-aligned: Go allocates so
		b, err := d.buffer(true)
		if err != nil {
			t.Fatal(err)
		}
		got := b.Bytes()
		if string(got) != string(body[8+off:8+off+16]) || addr(got)%8 != 0 {
			t.Fatalf("offset %d: %v at %#x", off, got, addr(got))
		}
		if aliased := addr(got) == addr(body[8+off:]); aliased != (off%8 == 0) {
			t.Errorf("offset %d: the body's bytes %v, want %v", off, aliased, off%8 == 0)
		}
	}
}

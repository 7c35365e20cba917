package reader

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestEncoderMatchesArrowWriter compares the encoder's bytes with those of
// Arrow's ipc.Writer (arrowEncoder, the reader's encoder before it wrote
// IPC itself) over random batches of every type a reader sends: with and
// without nulls, all null, empty strings and lists, arrays built by Arrow's
// builders, sliced, decoded without copying from block segments (as SIG
// serves them), and with buffers longer than their values (which ipc.Writer
// then sends whole).
func TestEncoderMatchesArrowWriter(t *testing.T) {
	types := []transform.Type{transform.Int64, transform.Float64, transform.String, transform.ListString, transform.ListInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		rows := []int{1, 2, 7, 8, 9, 63, 64, 65, 100, 511, 1000, 4096, 5000}[rng.IntN(13)]
		ncols := 1 + rng.IntN(5)
		var fields []arrow.Field
		var cols []arrow.Array
		var desc []string
		for c := 0; c < ncols; c++ {
			typ := types[rng.IntN(len(types))]
			nulls := []float64{0, 0, 0.1, 0.5, 1}[rng.IntN(5)]
			src := rng.IntN(5)
			a := randomColumn(t, rng, typ, rows, nulls, src)
			fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", c), Type: typ.ArrowType(), Nullable: c > 0})
			cols = append(cols, a)
			desc = append(desc, fmt.Sprintf("%s/nulls=%.1f/src=%d", typ, nulls, src))
		}
		schema := arrow.NewSchema(fields, nil)
		enc, err := newEncoder(schema)
		if err != nil {
			t.Fatal(err)
		}
		ref := &arrowEncoder{schema: schema}
		// Batches aligned to a random batch size, as serve cuts them, from a
		// random start row; then a few arbitrary ranges.
		b := []int{1, 3, 8, 64, 100, 4096, rows}[rng.IntN(7)]
		var ranges [][2]int
		for lo := rng.IntN(rows); lo < rows; {
			hi := min((lo/b+1)*b, rows)
			ranges = append(ranges, [2]int{lo, hi})
			lo = hi
		}
		for k := 0; k < 4; k++ {
			lo := rng.IntN(rows)
			ranges = append(ranges, [2]int{lo, lo + 1 + rng.IntN(rows-lo)})
		}
		ranges = append(ranges, [2]int{0, rows})
		for _, r := range ranges {
			want, err := ref.encode(cols, int64(r[0]), int64(r[1]))
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeIPC(enc, cols, int64(r[0]), int64(r[1]))
			if err != nil {
				t.Fatalf("iter %d %v rows [%d, %d): %v", iter, desc, r[0], r[1], err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("iter %d: columns %v (%d rows), rows [%d, %d): %d bytes differ from ipc.Writer's %d (first difference at %d)",
					iter, strings.Join(desc, " "), rows, r[0], r[1], len(got), len(want), firstDiff(got, want))
			}
			// The marshaled response serve sends is proto.Marshal's of
			// the same ReadResponse.
			m, err := enc.encodeMessage(cols, int64(r[0]), int64(r[1]))
			if err != nil {
				t.Fatal(err)
			}
			wantMsg, err := proto.Marshal(&readerv1.ReadResponse{ArrowIpc: want, StartRow: int64(r[0]), Rows: int64(r[1] - r[0])})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.ipc, want) || !bytes.Equal(*m.buf, wantMsg) {
				t.Fatalf("iter %d: rows [%d, %d): marshaled message differs from proto.Marshal's (%d bytes, want %d; first difference at %d)",
					iter, r[0], r[1], len(*m.buf), len(wantMsg), firstDiff(*m.buf, wantMsg))
			}
			if iter == 0 {
				// The codec hands the buffer over once; a second
				// marshaling is an error, not a response without its bytes.
				if bs, err := (serverCodec{}).Marshal(m); err != nil || !bytes.Equal(bs.Materialize(), wantMsg) {
					t.Fatalf("codec: %v, or bytes differ", err)
				} else {
					bs.Free()
				}
				if _, err := (serverCodec{}).Marshal(m); err == nil {
					t.Fatal("a batch message marshaled twice")
				}
			}
			m.free()
		}
		for _, c := range cols {
			c.Release()
		}
	}
}

// encodeIPC returns the IPC stream of rows [lo, hi) of cols alone, as
// encodeMessage writes it inside a response.
func encodeIPC(e *encoder, cols []arrow.Array, lo, hi int64) ([]byte, error) {
	size, err := e.layout(cols, lo, hi)
	if err != nil {
		return nil, err
	}
	out := make([]byte, size)
	e.write(out)
	return out, nil
}

// TestEncoderDecodes checks that a response decodes, with Arrow's reader,
// to the rows encoded.
func TestEncoderDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	col := randomColumn(t, rng, transform.ListString, 300, 0.2, 1)
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: col.DataType(), Nullable: true}}, nil)
	enc, err := newEncoder(schema)
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeIPC(enc, []arrow.Array{col}, 100, 250)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("no record: %v", r.Err())
	}
	want := array.NewSlice(col, 100, 250)
	defer want.Release()
	if got := r.Record().Column(0); !array.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	if r.Next() {
		t.Fatal("more than one record")
	}
}

func TestEncoderRejectsOtherTypes(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.FixedWidthTypes.Boolean}}, nil)
	if _, err := newEncoder(schema); err == nil {
		t.Fatal("boolean column accepted")
	}
}

// randomColumn returns rows random values of typ, a fraction nulls of them
// null, from source src: 0 Arrow's builders; 1 a slice of a longer array
// (non-zero data offset); 2 decoded without copying from a block segment
// (as SIG serves memo objects); 3 buffers longer than the values (padding
// garbage that ipc.Writer sends when it sends a buffer whole); 4 offsets
// that do not start at 0 (see dropPrefix).
func randomColumn(tb testing.TB, rng *rand.Rand, typ transform.Type, rows int, nulls float64, src int) arrow.Array {
	tb.Helper()
	switch src {
	case 1:
		pre, post := 1+rng.IntN(70), rng.IntN(70)
		long := buildColumn(rng, typ, pre+rows+post, nulls)
		defer long.Release()
		return array.NewSlice(long, int64(pre), int64(pre+rows))
	case 2:
		a := buildColumn(rng, typ, rows, nulls)
		defer a.Release()
		s := arrow.NewSchema([]arrow.Field{{Name: "v", Type: a.DataType(), Nullable: true}}, nil)
		rec := array.NewRecord(s, []arrow.Array{a}, int64(rows))
		defer rec.Release()
		m := block.Meta{Key: "k", ID: "b", Source: "ads", WindowLength: 1, SchemaFingerprint: "fp",
			Kafka: &block.KafkaRange{Topic: "t", First: 0, Last: 1}}
		m.ID = block.ID(0, *m.Kafka)
		m.Key = block.RawKey("ads", blockref.New(m.ID, 1))
		data, meta, err := block.Encode(m, rec)
		if err != nil {
			tb.Fatal(err)
		}
		c := meta.Columns[0]
		out, err := block.DecodeSegment(m.Key, c, data[c.Offset:c.Offset+c.Length], int64(rows))
		if err != nil {
			tb.Fatal(err)
		}
		return out
	case 3:
		a := buildColumn(rng, typ, rows, nulls)
		defer a.Release()
		return array.MakeFromData(padBuffers(rng, a.Data()))
	case 4:
		pre := 1 + rng.IntN(70)
		long := buildColumn(rng, typ, pre+rows, nulls)
		defer long.Release()
		return array.MakeFromData(dropPrefix(long.Data(), pre))
	}
	return buildColumn(rng, typ, rows, nulls)
}

// dropPrefix returns the rows of d after its first pre at data offset 0,
// with offset buffers that do not start at 0 (valid Arrow, never written by
// a builder).
func dropPrefix(d arrow.ArrayData, pre int) arrow.ArrayData {
	n := d.Len() - pre
	bufs := make([]*memory.Buffer, len(d.Buffers()))
	if v := d.Buffers()[0]; v != nil && d.NullN() != 0 {
		bm := make([]byte, (n+7)/8)
		bitutil.CopyBitmap(v.Bytes(), d.Offset()+pre, n, bm, 0)
		bufs[0] = memory.NewBufferBytes(bm)
	}
	var width int
	switch d.DataType().ID() {
	case arrow.INT64, arrow.FLOAT64:
		width = 8
	default:
		width = 4
	}
	b := d.Buffers()[1].Bytes()
	bufs[1] = memory.NewBufferBytes(b[(d.Offset()+pre)*width:])
	if len(bufs) > 2 {
		bufs[2] = d.Buffers()[2]
	}
	nulls := d.NullN()
	if nulls != 0 {
		nulls = array.UnknownNullCount
	}
	return array.NewData(d.DataType(), n, bufs, d.Children(), nulls, 0)
}

// padBuffers returns d with every buffer extended by up to 63 random bytes.
func padBuffers(rng *rand.Rand, d arrow.ArrayData) arrow.ArrayData {
	bufs := make([]*memory.Buffer, len(d.Buffers()))
	for i, b := range d.Buffers() {
		if b == nil {
			continue
		}
		nb := make([]byte, b.Len(), b.Len()+64)
		copy(nb, b.Bytes())
		for range rng.IntN(64) {
			nb = append(nb, byte(rng.Uint32()))
		}
		bufs[i] = memory.NewBufferBytes(nb)
	}
	var children []arrow.ArrayData
	for _, c := range d.Children() {
		pc := padBuffers(rng, c)
		defer pc.Release()
		children = append(children, pc)
	}
	return array.NewData(d.DataType(), d.Len(), bufs, children, d.NullN(), d.Offset())
}

func buildColumn(rng *rand.Rand, typ transform.Type, rows int, nulls float64) arrow.Array {
	b := array.NewBuilder(memory.DefaultAllocator, typ.ArrowType())
	defer b.Release()
	str := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(12))
	}
	for r := 0; r < rows; r++ {
		if rng.Float64() < nulls {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.Int64Builder:
			b.Append(rng.Int64())
		case *array.Float64Builder:
			b.Append(rng.NormFloat64())
		case *array.StringBuilder:
			b.Append(str())
		case *array.ListBuilder:
			b.Append(true)
			for range []int{0, 0, 1, 2, 5}[rng.IntN(5)] {
				switch vb := b.ValueBuilder().(type) {
				case *array.StringBuilder:
					if rng.IntN(10) == 0 {
						vb.AppendNull()
					} else {
						vb.Append(str())
					}
				case *array.Int64Builder:
					if rng.IntN(10) == 0 {
						vb.AppendNull()
					} else {
						vb.Append(rng.Int64N(1000))
					}
				}
			}
		}
	}
	return b.NewArray()
}

// arrowEncoder is the reader's encoder before it wrote IPC itself, minus
// its buffer recycling: Arrow's ipc.Writer over the sliced record. It is
// the reference the encoder's bytes are compared with.
type arrowEncoder struct {
	schema *arrow.Schema
	out    bytes.Buffer
}

func (e *arrowEncoder) encode(cols []arrow.Array, lo, hi int64) ([]byte, error) {
	sliced := make([]arrow.Array, len(cols))
	for i, c := range cols {
		sliced[i] = array.NewSlice(c, lo, hi)
	}
	rec := array.NewRecord(e.schema, sliced, hi-lo)
	for _, c := range sliced {
		c.Release()
	}
	defer rec.Release()
	e.out.Reset()
	w := ipc.NewWriter(&e.out, ipc.WithSchema(e.schema))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	return e.out.Bytes(), nil
}

// TestDecodeBatchCorruptLengths: a response whose lengths say more than it
// holds is an error of decodeBatch, never an allocation of what they say
// (Arrow's reader sizes its buffers from them before reading).
func TestDecodeBatchCorruptLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	col := randomColumn(t, rng, transform.Int64, 100, 0, 0)
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: col.DataType()}}, nil)
	enc, err := newEncoder(schema)
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeIPC(enc, []arrow.Array{col}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := decodeBatch(data); err != nil {
		t.Fatalf("valid batch: %v", err)
	} else {
		rec.Release()
	}
	// The record batch message follows the schema message.
	schemaLen := 8 + int(binary.LittleEndian.Uint32(data[4:]))
	schemaLen += int(bodyLengthField(t, data[8:schemaLen]))
	batchMeta := data[schemaLen+8 : schemaLen+8+int(binary.LittleEndian.Uint32(data[schemaLen+4:]))]
	for _, c := range []struct {
		name  string
		patch func(b []byte)
	}{
		{"huge body", func(b []byte) { setBodyLength(t, b[schemaLen+8:schemaLen+8+len(batchMeta)], 1<<40) }},
		{"negative body", func(b []byte) { setBodyLength(t, b[schemaLen+8:schemaLen+8+len(batchMeta)], -8) }},
		{"huge metadata", func(b []byte) { binary.LittleEndian.PutUint32(b[schemaLen+4:], 1<<31-8) }},
		{"negative metadata", func(b []byte) { binary.LittleEndian.PutUint32(b[4:], 0x80000000) }},
		{"no continuation", func(b []byte) { binary.LittleEndian.PutUint32(b[schemaLen:], 7) }},
		// Within the framing, a buffer's length in the batch's metadata.
		{"huge buffer", func(b []byte) { setLastBufferLength(t, b[schemaLen+8:schemaLen+8+len(batchMeta)], 1<<40) }},
	} {
		b := append([]byte(nil), data...)
		c.patch(b)
		if rec, err := decodeBatch(b); err == nil {
			rec.Release()
			t.Errorf("%s: decoded", c.name)
		}
	}
	for n := 0; n < len(data); n += 7 {
		if rec, err := decodeBatch(data[:n]); err == nil {
			rec.Release()
			t.Errorf("truncated to %d of %d bytes: decoded", n, len(data))
		}
	}
}

// bodyLengthField reads Message.bodyLength (field 3) of a message's
// flatbuffer.
func bodyLengthField(t *testing.T, meta []byte) int64 {
	tab := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	o := flatbuffers.UOffsetT(tab.Offset(10))
	if o == 0 {
		return 0
	}
	return tab.GetInt64(o + tab.Pos)
}

// setLastBufferLength sets the length of the last buffer of a record batch
// message (Message.header, field 2, is the RecordBatch; its field 2 the
// vector of Buffer structs of offset and length).
func setLastBufferLength(t *testing.T, meta []byte, v int64) {
	msg := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	o := flatbuffers.UOffsetT(msg.Offset(4 + 2*2))
	if o == 0 {
		t.Fatal("message without a header")
	}
	rb := flatbuffers.Table{Bytes: meta, Pos: msg.Indirect(o + msg.Pos)}
	ob := flatbuffers.UOffsetT(rb.Offset(4 + 2*2))
	if ob == 0 || rb.VectorLen(ob) == 0 {
		t.Fatal("record batch without buffers")
	}
	last := rb.Vector(ob) + flatbuffers.UOffsetT(16*(rb.VectorLen(ob)-1))
	binary.LittleEndian.PutUint64(meta[last+8:], uint64(v))
}

func setBodyLength(t *testing.T, meta []byte, v int64) {
	tab := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	o := flatbuffers.UOffsetT(tab.Offset(10))
	if o == 0 {
		t.Fatal("message without a bodyLength field")
	}
	binary.LittleEndian.PutUint64(meta[o+tab.Pos:], uint64(v))
}

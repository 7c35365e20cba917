package reader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// encoder turns rows of the batch columns into the arrow_ipc bytes of one
// ReadResponse: a complete Arrow IPC stream (schema message, one record
// batch message, end-of-stream marker). The bytes depend only on the schema
// and the values (buffers are sliced and offsets rebased the same way
// whatever produced the arrays), which is why SIG and LIG readers send
// identical bytes.
//
// The bytes are exactly those of Arrow's ipc.Writer writing the sliced
// record (TestEncoderMatchesArrowWriter compares the two over random
// batches of every type a reader sends), but written directly: the schema
// message, the same in every response, is encoded once per stream; the
// record batch header is built in a reused flatbuffer builder; and each body
// buffer is copied once from the source arrays into the response's buffer
// (encodeMessage: the marshaled response, which gRPC then sends without
// marshaling it again), value offsets rebased on the way. Arrow's writer spent more on
// allocations, zeroing, offset rebasing into scratch buffers and the schema
// than on the copy itself: writing directly took about a fifth off a SIG
// reader's own CPU when it was written (BenchmarkServe/sig, 86 -> 69 CPU
// ns/example at 300x, -cpu 1).
//
// The rules deciding each buffer's extent are ipc.Writer's (writer.go,
// recordEncoder.visit, Arrow Go v15): they depend on the arrays' offsets
// and buffer lengths, not only their values, and are reproduced as they
// are, edge cases included, so that the bytes do not change. An Arrow
// upgrade that changes what ipc.Writer writes fails the test above.
type encoder struct {
	schema    *arrow.Schema
	schemaMsg []byte // the schema message, framed
	// The schema message as Flight sends it (flightSchema), made once.
	flightOnce   sync.Once
	flightHeader []byte
	flightErr    error
	nodes        []fieldNode
	bufs         []bodyBuffer
	fb           *flatbuffers.Builder
	// The batch layout planned: its header, padded length and body length.
	meta    []byte
	metaLen int64
	body    int64
}

// fieldNode is a FieldNode of the record batch header.
type fieldNode struct{ length, nulls int64 }

// bodyBuffer is one buffer of the record batch body and how to write it.
type bodyBuffer struct {
	kind bufferKind
	src  []byte  // bufCopy: the bytes; bufBitmap: the source bitmap
	offs []int32 // bufOffsets: the source offsets to rebase (n+1 of them)
	bit  int     // bufBitmap: the first bit
	bits int     // bufBitmap: the number of bits
	len  int64   // bytes in the body (before padding to 8)
	pos  int64   // offset in the body
}

type bufferKind uint8

const (
	bufNone    bufferKind = iota // absent (length 0)
	bufCopy                      // src as is
	bufZero                      // len zero bytes (an all-null validity bitmap)
	bufBitmap                    // bits [bit, bit+bits) of src, then zeros to len
	bufOffsets                   // offs minus offs[0], as int32
)

// Arrow IPC constants (Arrow Go v15 ipc.go, Message.fbs).
const (
	arrowAlignment    = 64 // kArrowAlignment: buffers are sized to 64-byte multiples
	ipcContinuation   = 0xFFFFFFFF
	metadataV5        = 4 // flatbuf.MetadataVersionV5
	headerRecordBatch = 3 // flatbuf.MessageHeaderRecordBatch
)

var endOfStream = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}

var errEncode = errors.New("arrow ipc")

// newEncoder returns an encoder of batches of schema, which must hold only
// types a reader sends (transform's: int64, float64, string, and lists of
// int64 or string).
func newEncoder(schema *arrow.Schema) (*encoder, error) {
	for _, f := range schema.Fields() {
		if !encodable(f.Type) {
			return nil, fmt.Errorf("%w: column %q: type %s is not one a reader sends", errEncode, f.Name, f.Type)
		}
	}
	// The schema message as ipc.Writer writes it: an empty stream is the
	// schema message and the end-of-stream marker.
	var b bytes.Buffer
	w := ipc.NewWriter(&b, ipc.WithSchema(schema))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("%w: %w", errEncode, err)
	}
	msg := b.Bytes()
	if !bytes.HasSuffix(msg, endOfStream[:]) {
		return nil, fmt.Errorf("%w: schema stream does not end with end-of-stream", errEncode)
	}
	return &encoder{schema: schema, schemaMsg: msg[:len(msg)-len(endOfStream)], fb: flatbuffers.NewBuilder(1024)}, nil
}

func encodable(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.Int64Type, *arrow.Float64Type, *arrow.StringType:
		return true
	case *arrow.ListType:
		return encodable(t.Elem())
	}
	return false
}

// layout plans the IPC stream of rows [lo, hi) of cols (its field nodes,
// body buffers and record batch header) and returns its size; write then
// writes it.
func (e *encoder) layout(cols []arrow.Array, lo, hi int64) (int64, error) {
	e.nodes, e.bufs = e.nodes[:0], e.bufs[:0]
	for i, c := range cols {
		if hi > int64(c.Len()) || lo < 0 || lo > hi {
			return 0, fmt.Errorf("%w: rows [%d, %d) of column %d of %d rows", errEncode, lo, hi, i, c.Len())
		}
		d := c.Data()
		if err := e.visit(d, d.Offset()+int(lo), int(hi-lo)); err != nil {
			return 0, fmt.Errorf("%w: column %d: %w", errEncode, i, err)
		}
	}
	body := int64(0)
	for i := range e.bufs {
		e.bufs[i].pos = body
		body += pad(e.bufs[i].len, 8)
	}
	e.body = body
	e.meta = e.header(hi-lo, body)
	// schema message | 0xFFFFFFFF, metadata length | metadata, padding | body | end of stream
	e.metaLen = pad(int64(len(e.meta))+8, 8) - 8
	return int64(len(e.schemaMsg)) + 8 + e.metaLen + body + int64(len(endOfStream)), nil
}

// write writes the stream layout planned into out, which has the size
// layout returned. Every byte of out is written.
func (e *encoder) write(out []byte) {
	n := copy(out, e.schemaMsg)
	binary.LittleEndian.PutUint32(out[n:], ipcContinuation)
	binary.LittleEndian.PutUint32(out[n+4:], uint32(e.metaLen))
	n += 8
	clear(out[n+copy(out[n:], e.meta) : n+int(e.metaLen)])
	n += int(e.metaLen)
	e.writeBody(out[n : n+int(e.body)])
	copy(out[n+int(e.body):], endOfStream[:])
}

// writeBody writes the record batch body layout planned into out, which has
// its length (e.body). Every byte of out is written.
func (e *encoder) writeBody(out []byte) {
	for i := range e.bufs {
		b := &e.bufs[i]
		dst := out[b.pos : b.pos+pad(b.len, 8)]
		switch b.kind {
		case bufCopy:
			clear(dst[copy(dst, b.src):])
		case bufZero:
			clear(dst)
		case bufBitmap:
			clear(dst)
			bitutil.CopyBitmap(b.src, b.bit, b.bits, dst, 0)
		case bufOffsets:
			rebase(dst, b.offs)
		}
	}
}

// batchMessage is one batch response, marshaled: the protobuf encoding of
// a ReadResponse with arrow_ipc, start_row and rows set, in a buffer from
// readerBufferPool. The IPC stream is written straight into it, so that
// sending it costs no copy into a second buffer (gRPC's Send would marshal
// the response, copying arrow_ipc, a few hundred KiB per batch). The
// serverCodec hands the buffer to gRPC, which returns it to the pool once
// written; Serve's send callers get a ReadResponse viewing it instead.
type batchMessage struct {
	buf      *[]byte
	ipc      []byte // the arrow_ipc bytes, within *buf
	startRow int64
	rows     int64
}

// encodeMessage returns rows [lo, hi) of cols as a marshaled response.
func (e *encoder) encodeMessage(cols []arrow.Array, lo, hi int64) (*batchMessage, error) {
	size, err := e.layout(cols, lo, hi)
	if err != nil {
		return nil, err
	}
	// Fields in number order, as proto.Marshal writes them (a zero
	// start_row or rows is left out, as proto3 does).
	var head, tail [2 * binary.MaxVarintLen64]byte
	h := protowire.AppendVarint(protowire.AppendTag(head[:0], 1, protowire.BytesType), uint64(size))
	t := tail[:0]
	if lo != 0 {
		t = protowire.AppendVarint(protowire.AppendTag(t, 2, protowire.VarintType), uint64(lo))
	}
	if hi != lo {
		t = protowire.AppendVarint(protowire.AppendTag(t, 3, protowire.VarintType), uint64(hi-lo))
	}
	buf := readerBufferPool.Get(len(h) + int(size) + len(t))
	out := *buf
	copy(out, h)
	ipc := out[len(h) : len(h)+int(size)]
	e.write(ipc)
	copy(out[len(h)+int(size):], t)
	return &batchMessage{buf: buf, ipc: ipc, startRow: lo, rows: hi - lo}, nil
}

// response returns the message as a ReadResponse viewing its buffer.
func (m *batchMessage) response() *readerv1.ReadResponse {
	return &readerv1.ReadResponse{ArrowIpc: m.ipc, StartRow: m.startRow, Rows: m.rows}
}

// take hands the message's buffer to the caller (gRPC, through the
// codec), at most once: the buffer is the caller's from then on.
func (m *batchMessage) take() (mem.BufferSlice, error) {
	if m.buf == nil {
		return nil, errors.New("reader: batch message marshaled twice")
	}
	buf := m.buf
	m.buf, m.ipc = nil, nil
	return mem.BufferSlice{mem.NewBuffer(buf, readerBufferPool)}, nil
}

// GetRows returns the batch's rows, as ReadResponse.GetRows does (stream
// interceptors read it).
func (m *batchMessage) GetRows() int64 { return m.rows }

// free returns the message's buffer to the pool, unless taken.
func (m *batchMessage) free() {
	if m.buf != nil {
		readerBufferPool.Put(m.buf)
		m.buf, m.ipc = nil, nil
	}
}

// rebase writes offs minus offs[0] into dst as little-endian int32s and
// zeroes the rest of dst.
func rebase(dst []byte, offs []int32) {
	base := offs[0]
	o := arrow.Int32Traits.CastFromBytes(dst[:4*len(offs)])
	o = o[:len(offs)] // no bounds check in the loop (0.34 to 0.29 ns per offset)
	for i, v := range offs {
		o[i] = v - base
	}
	clear(dst[4*len(offs):])
}

// header returns the record batch message's flatbuffer, built with the
// calls of ipc's writeRecordMessage (uncompressed, no variadic buffers).
// It is valid until the next call.
func (e *encoder) header(rows, bodyLen int64) []byte {
	b := e.fb
	b.Reset()
	b.StartVector(16, len(e.nodes), 8)
	for i := len(e.nodes) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(e.nodes[i].nulls)
		b.PrependInt64(e.nodes[i].length)
	}
	nodes := b.EndVector(len(e.nodes))
	b.StartVector(16, len(e.bufs), 8)
	for i := len(e.bufs) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(e.bufs[i].len)
		b.PrependInt64(e.bufs[i].pos)
	}
	bufs := b.EndVector(len(e.bufs))
	b.StartObject(5) // RecordBatch
	b.PrependInt64Slot(0, rows, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, bufs, 0)
	rb := b.EndObject()
	b.StartObject(5) // Message
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, headerRecordBatch, 0)
	b.PrependUOffsetTSlot(2, rb, 0)
	b.PrependInt64Slot(3, bodyLen, 0)
	b.Finish(b.EndObject())
	return b.FinishedBytes()
}

// visit appends the field nodes and body buffers of n rows of d from row
// off (absolute, d's own offset included), as ipc.Writer's visit does for
// array.NewSlice of those rows.
func (e *encoder) visit(d arrow.ArrayData, off, n int) error {
	bufs := d.Buffers()
	if off < 0 || n < 0 || off+n > d.Offset()+d.Len() || len(bufs) == 0 {
		return fmt.Errorf("rows [%d, +%d) outside the array", off, n)
	}
	// The null count of the slice: array.NewSliceData keeps 0, else the
	// slice counts its validity bits (Array.NullN).
	validity := bufs[0]
	nulls := 0
	if d.NullN() != 0 && n > 0 {
		if validity == nil || validity.Len()*8 < off+n {
			return fmt.Errorf("%d nulls but a validity bitmap of %d bytes", d.NullN(), len(bytesOf(validity)))
		}
		nulls = n - bitutil.CountSetBits(validity.Bytes(), off, n)
	}
	e.nodes = append(e.nodes, fieldNode{int64(n), int64(nulls)})
	switch {
	case nulls == 0:
		e.bufs = append(e.bufs, bodyBuffer{})
	case nulls == n:
		e.bufs = append(e.bufs, bodyBuffer{kind: bufZero, len: pad(bytesForBits(n), arrowAlignment)})
	default:
		minLen := pad(bytesForBits(n), arrowAlignment)
		if off != 0 || minLen < int64(validity.Len()) {
			e.bufs = append(e.bufs, bodyBuffer{kind: bufBitmap, src: validity.Bytes(), bit: off, bits: n, len: minLen})
		} else {
			e.bufs = append(e.bufs, whole(validity.Bytes()))
		}
	}

	switch t := d.DataType().(type) {
	case *arrow.Int64Type, *arrow.Float64Type:
		const width = 8
		if len(bufs) < 2 || bufs[1] == nil {
			e.bufs = append(e.bufs, bodyBuffer{})
			return nil
		}
		values := bufs[1].Bytes()
		if off == 0 && pad(int64(n*width), arrowAlignment) >= int64(len(values)) {
			e.bufs = append(e.bufs, whole(values))
			return nil
		}
		l := min(pad(int64(n*width), 8), int64(len(values)-off*width))
		if l < 0 {
			return fmt.Errorf("values buffer of %d bytes for rows [%d, +%d)", len(values), off, n)
		}
		e.bufs = append(e.bufs, whole(values[off*width:off*width+int(l)]))
		return nil

	case *arrow.StringType:
		if len(bufs) < 3 {
			return errors.New("string array without 3 buffers")
		}
		offs, err := e.offsets(bytesOf(bufs[1]), off, n)
		if err != nil {
			return err
		}
		values := bufs[2]
		if values == nil {
			e.bufs = append(e.bufs, bodyBuffer{})
			return nil
		}
		total := 0
		if offs != nil {
			total = int(offs[n] - offs[0])
		}
		if off == 0 && total >= values.Len() {
			e.bufs = append(e.bufs, whole(values.Bytes()))
			return nil
		}
		if offs == nil {
			return errors.New("string values without offsets")
		}
		beg := int(offs[0])
		if beg < 0 || total < 0 || beg+total > values.Len() {
			return fmt.Errorf("string offsets [%d, +%d) outside %d value bytes", beg, total, values.Len())
		}
		e.bufs = append(e.bufs, whole(values.Bytes()[beg:beg+total]))
		return nil

	case *arrow.ListType:
		if len(bufs) < 2 || len(d.Children()) != 1 {
			return errors.New("list array without offsets or values")
		}
		offs, err := e.offsets(bytesOf(bufs[1]), off, n)
		if err != nil {
			return err
		}
		child := d.Children()[0]
		a, b := 0, 0
		if n > 0 && offs != nil {
			a, b = int(offs[0]), int(offs[n])
		}
		if a < 0 || a > b || b > child.Len() {
			return fmt.Errorf("list values [%d, %d) outside %d values", a, b, child.Len())
		}
		if err := e.visit(child, child.Offset()+a, b-a); err != nil {
			return fmt.Errorf("list values: %w", err)
		}
		return nil

	default:
		return fmt.Errorf("type %s is not one a reader sends", t)
	}
}

// offsets appends the value offsets buffer of n rows from row off (of a
// string or list array with offsets buffer ob) and returns the n+1 source
// offsets, or nil when ob is empty (ipc.Writer's getZeroBasedValueOffsets).
func (e *encoder) offsets(ob []byte, off, n int) ([]int32, error) {
	if len(ob) == 0 {
		e.bufs = append(e.bufs, bodyBuffer{})
		return nil, nil
	}
	all := arrow.Int32Traits.CastFromBytes(ob)
	if off+n+1 > len(all) {
		return nil, fmt.Errorf("offsets buffer of %d bytes for rows [%d, +%d)", len(ob), off, n)
	}
	offs := all[off : off+n+1]
	need := 4 * (n + 1)
	if off == 0 && need >= len(ob) {
		e.bufs = append(e.bufs, whole(ob))
	} else {
		e.bufs = append(e.bufs, bodyBuffer{kind: bufOffsets, offs: offs, len: int64(need)})
	}
	return offs, nil
}

func whole(b []byte) bodyBuffer {
	if len(b) == 0 {
		return bodyBuffer{}
	}
	return bodyBuffer{kind: bufCopy, src: b, len: int64(len(b))}
}

func bytesOf(b *memory.Buffer) []byte {
	if b == nil {
		return nil
	}
	return b.Bytes()
}

func pad(n, align int64) int64 { return (n + align - 1) / align * align }

func bytesForBits(n int) int64 { return int64(n+7) / 8 }

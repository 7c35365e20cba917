package block

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/objstore"
)

// This file reads column segments of block objects (one Arrow IPC file per
// column, CRC-32C of each in the footer) as cheaply as possible, because in
// SIG mode reading is nearly all an input reader does (paper IV.B reports
// readers 4.3x-7.5x cheaper with SIG; the copies and allocations of a
// generic decoder would eat that):
//
//   - segments that lie close together in the object are fetched with one
//     ranged GET (PlanSpans: a hole limit and a range size limit, fetch.go);
//   - each segment's CRC-32C is checked against the footer, as block does;
//   - a segment is decoded without copying: the arrays' buffers are slices
//     of the fetched bytes (Arrow's IPC reader copies every buffer twice,
//     into buffers as large as the metadata says). The decoder reads exactly
//     the layout block.Encode writes (an IPC file of one batch; compressed
//     buffers are decompressed once, into memory of their own, bounded by
//     what the rows need, and integers stored narrow widened once: narrow.go)
//     and checks the segment's schema against the footer's type and every
//     length and offset against the bytes it has, so a segment that passed
//     its checksum but was written wrong (or by another writer) is
//     ErrCorrupt, never a panic, a huge allocation or values of one type
//     read as another.
//
// The segment bytes also let a reader check row alignment of a memo object
// cheaply: its event_id segment is byte-identical to the raw block's when
// the event ids are equal (both are the same column written by the same
// encoder); only when the bytes differ are the values decoded and compared.

// Span is one ranged GET of FetchSegmentsInto: the bytes [Off, End) of the
// object, which hold the segments of Members (in offset order).
type Span struct {
	Off, End int64
	Members  []SpanMember
	// footer, when set, is where the object's footer starts within the
	// span, which runs to the object's end (a planned read with a cached
	// footer reads the footer back: fetch.go).
	footer int64
}

// SpanMember is a column whose segment a Span holds; Index is its position
// in the names asked for.
type SpanMember struct {
	Index  int
	Column Column
}

// Spans returns the ranged GETs that fetch the named columns' segments of
// the block meta describes, coalesced within the package's limits
// (PlanSpans with the defaults: HoleLimit, RangeLimit).
func Spans(meta Meta, names []string) ([]Span, error) {
	return PlanSpans(meta, names, ReadLimits{})
}

// PlanSpans returns the ranged GETs that fetch the named columns' segments
// of the block meta describes, as Arrow's ReadRangeCache coalesces ranges:
// the segments in offset order, a segment joining the previous range when
// the hole between them is at most lim.Hole and the range stays within
// lim.Range (a segment longer than that is a range of its own). A name the
// block lacks is ErrNoColumn; a segment outside the object's data is
// ErrCorrupt.
func PlanSpans(meta Meta, names []string, lim ReadLimits) ([]Span, error) {
	lim = lim.EnsureDefaults()
	sorted := make([]SpanMember, len(names))
	for i, n := range names {
		c, ok := meta.Column(n)
		if !ok {
			return nil, fmt.Errorf("block %s: column %q: %w", meta.Key, n, ErrNoColumn)
		}
		// Length is compared with what is left after Offset, so that no
		// sum of two directory fields can overflow.
		if c.Offset < 0 || c.Length <= 0 || c.Length > math.MaxInt64-c.Offset ||
			meta.FooterOffset > 0 && c.Length > meta.FooterOffset-c.Offset {
			return nil, fmt.Errorf("block %s: column %s: segment [%d,+%d) outside the data: %w", meta.Key, n, c.Offset, c.Length, ErrCorrupt)
		}
		sorted[i] = SpanMember{i, c}
	}
	slices.SortFunc(sorted, func(a, b SpanMember) int { return cmp.Compare(a.Column.Offset, b.Column.Offset) })
	var spans []Span
	for _, m := range sorted {
		c := m.Column
		if n := len(spans); n > 0 {
			last := &spans[n-1]
			// Differences of non-negative offsets, which cannot
			// overflow as sums could.
			if end := max(last.End, c.Offset+c.Length); c.Offset-last.End <= lim.Hole && end-last.Off <= lim.Range {
				last.End = end
				last.Members = append(last.Members, m)
				continue
			}
		}
		spans = append(spans, Span{Off: c.Offset, End: c.Offset + c.Length, Members: []SpanMember{m}})
	}
	return spans, nil
}

// FetchSegments returns the named columns' segments of the block object
// meta describes (meta from block.ReadFooter or the catalog), each checked
// against its CRC-32C.
func FetchSegments(ctx context.Context, store objstore.Reader, meta Meta, names []string) ([][]byte, error) {
	return FetchSegmentsInto(ctx, store, meta, names, nil)
}

// Alloc supplies the buffers FetchSegmentsInto fetches into: a slice of
// length n (its contents may be anything; every byte is overwritten before
// it is read). It is called from several goroutines at once.
type Alloc func(n int) []byte

// FetchSegmentsInto is FetchSegments fetching into buffers from alloc
// (make when alloc is nil), one per ranged GET. The segments returned are
// slices of those buffers, and so is everything DecodeSegment decodes from
// them: the caller may recycle a buffer only once nothing reads those
// segments or arrays any more. Every buffer alloc handed out is the
// caller's again when FetchSegmentsInto returns, whether or not it
// succeeded (no request writes into it after that).
func FetchSegmentsInto(ctx context.Context, store objstore.Reader, meta Meta, names []string, alloc Alloc) ([][]byte, error) {
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	spans, err := Spans(meta, names)
	if err != nil {
		return nil, err
	}
	segs := make([][]byte, len(names))
	if err := fetchSpans(ctx, store, meta, spans, segs, alloc, nil); err != nil {
		return nil, err
	}
	return segs, nil
}

// fetchSpans fetches spans, concurrently, into buffers from alloc, and
// sets segs[m.Index] to each member's segment, checked against its
// CRC-32C; a span holding the footer has its bytes from there checked by
// verify. It returns when no request runs any more.
func fetchSpans(ctx context.Context, store objstore.Reader, meta Meta, spans []Span, segs [][]byte, alloc Alloc, verify func([]byte) error) error {
	errs := make([]error, len(spans))
	one := func(si int) {
		sp := &spans[si]
		n := sp.End - sp.Off
		data := alloc(int(n))
		if int64(len(data)) != n {
			errs[si] = fmt.Errorf("block %s: buffer of %d bytes for a range of %d", meta.Key, len(data), n)
			return
		}
		// Each segment's CRC-32C is computed as its bytes arrive, while
		// they are still in the CPU's caches (a second pass over a
		// block's worth of bytes costs as much again in memory
		// traffic).
		r := newSpanRead(sp, data)
		defer r.release()
		if err := store.GetRangeInto(ctx, meta.Key, sp.Off, data, r.filled); err != nil {
			errs[si] = err
			return
		}
		for k, m := range sp.Members {
			c := m.Column
			seg := data[c.Offset-sp.Off : c.Offset-sp.Off+c.Length : c.Offset-sp.Off+c.Length]
			if r.crcs[k] != c.CRC32C {
				errs[si] = fmt.Errorf("block %s: column %s: checksum mismatch: %w", meta.Key, c.Name, ErrCorrupt)
				return
			}
			segs[m.Index] = seg
		}
		if sp.footer > 0 && verify != nil {
			errs[si] = verify(data[sp.footer-sp.Off:])
		}
	}
	if len(spans) == 1 {
		one(0) // the common case: no goroutine to wait for
		return errs[0]
	}
	var wg sync.WaitGroup
	for si := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(si)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// spanRead is one ranged GET of FetchSegmentsInto: the running CRC-32C of
// each segment of its span. The GET goes through the objstore.Reader
// interface, which hides from the compiler that the callback does not
// outlive the call, so a callback made per GET would be allocated per GET;
// spanReads are pooled with their callback bound once.
type spanRead struct {
	sp     *Span
	data   []byte
	crcs   []uint32
	filled func(lo, hi int) // update, bound once
}

var spanReads = sync.Pool{New: func() any {
	r := &spanRead{}
	r.filled = r.update
	return r
}}

func newSpanRead(sp *Span, data []byte) *spanRead {
	r := spanReads.Get().(*spanRead)
	r.sp, r.data = sp, data
	r.crcs = slices.Grow(r.crcs[:0], len(sp.Members))[:len(sp.Members)]
	clear(r.crcs)
	return r
}

// update is filled: data[lo:hi] arrived. A retried request starts again at
// lo = 0.
func (r *spanRead) update(lo, hi int) {
	if lo == 0 {
		clear(r.crcs)
	}
	for k, m := range r.sp.Members {
		c := m.Column
		s := max(lo, int(c.Offset-r.sp.Off))
		e := min(hi, int(c.Offset-r.sp.Off+c.Length))
		if s < e {
			r.crcs[k] = crc32.Update(r.crcs[k], castagnoli, r.data[s:e])
		}
	}
}

// release returns r to the pool once its GET has returned (objstore calls
// filled only within the call).
func (r *spanRead) release() {
	r.sp, r.data = nil, nil
	spanReads.Put(r)
}

// ErrNotTail: FetchTail's object does not have the named column's segment
// where the caller expected it; read its footer and fetch the segment
// (ReadFooter, FetchSegmentsInto) instead.
var ErrNotTail = errors.New("segment not at the expected offset")

// After is where Encode starts the segment that follows c: segments start
// 8-byte aligned.
func After(c Column) int64 { return (c.Offset + c.Length + 7) &^ 7 }

// MaxTail bounds the bytes FetchTail reads.
const MaxTail = 1 << 30

// FetchTail reads the block object at key from offset from to its end in
// one request, when the caller knows that the named column's segment
// starts there and only the footer follows it, as the value column of a
// memo object does (its event_id segment, which it shares with its raw
// block, comes first). It returns the footer's Meta and the segment,
// checked against its CRC-32C. Otherwise it is two requests: the footer,
// then the segment. The segment is a slice of a buffer from alloc, as
// for FetchSegmentsInto. If the footer puts the segment elsewhere, or
// something besides the footer after it, the error is ErrNotTail.
//
// The segment's CRC is computed as its bytes arrive, while they are in
// the CPU's caches; where the segment ends is known only from the footer,
// at the end, so the running CRC is kept at every chunk boundary and the
// segment's is the last one before its end extended to it.
func FetchTail(ctx context.Context, store objstore.Reader, key string, from int64, name string, alloc Alloc) (Meta, []byte, error) {
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	r := newTailRead(alloc)
	defer r.release()
	tail, info, err := store.GetFromInto(ctx, key, from, MaxTail, r.allocFn, r.filled)
	if err != nil {
		return Meta{}, nil, err
	}
	if len(tail) < TrailerSize {
		return Meta{}, nil, corrupt(key, "%d bytes from offset %d: shorter than the trailer", len(tail), from)
	}
	flen, fcrc, err := parseTrailer(key, tail[len(tail)-TrailerSize:])
	if err != nil {
		return Meta{}, nil, err
	}
	foff := info.Size - TrailerSize - flen
	if foff < from {
		return Meta{}, nil, fmt.Errorf("block %s: footer at %d, before offset %d: %w", key, foff, from, ErrNotTail)
	}
	m, err := parseFooter(key, tail[foff-from:foff-from+flen], fcrc, info.Size, foff)
	if err != nil {
		return Meta{}, nil, err
	}
	m.Checksum = info.Checksum
	c, ok := m.Column(name)
	if !ok {
		return Meta{}, nil, fmt.Errorf("block %s: no column %s: %w", key, name, ErrNoColumn)
	}
	if c.Offset != from || c.Offset+c.Length != foff {
		return Meta{}, nil, fmt.Errorf("block %s: column %s at [%d,+%d), footer at %d, expected from %d: %w",
			key, name, c.Offset, c.Length, foff, from, ErrNotTail)
	}
	n := int(c.Length)
	segCRC, at := uint32(0), 0
	for _, mk := range r.marks {
		if mk.hi > n {
			break
		}
		segCRC, at = mk.crc, mk.hi
	}
	segCRC = crc32.Update(segCRC, castagnoli, tail[at:n])
	if segCRC != c.CRC32C {
		return Meta{}, nil, fmt.Errorf("block %s: column %s: checksum mismatch: %w", key, name, ErrCorrupt)
	}
	return m, tail[:n:n], nil
}

// tailRead is FetchTail's GET: the buffer alloc gave it and the running
// CRC-32C at every chunk boundary. Pooled with its callbacks bound once,
// as spanRead is, for the same reason.
type tailRead struct {
	alloc   Alloc
	buf     []byte
	crc     uint32
	marks   []tailMark
	allocFn func(n int) []byte // allocate, bound once
	filled  func(lo, hi int)   // update, bound once
}

// tailMark is the CRC-32C of a tail's bytes up to hi.
type tailMark struct {
	hi  int
	crc uint32
}

var tailReads = sync.Pool{New: func() any {
	r := &tailRead{}
	r.allocFn, r.filled = r.allocate, r.update
	return r
}}

func newTailRead(alloc Alloc) *tailRead {
	r := tailReads.Get().(*tailRead)
	r.alloc, r.marks, r.crc = alloc, r.marks[:0], 0
	return r
}

func (r *tailRead) allocate(n int) []byte {
	r.buf = r.alloc(n)
	return r.buf
}

// update is filled: buf[lo:hi] arrived. A retried request starts again at
// lo = 0.
func (r *tailRead) update(lo, hi int) {
	if lo == 0 {
		r.marks, r.crc = r.marks[:0], 0
	}
	r.crc = crc32.Update(r.crc, castagnoli, r.buf[lo:hi])
	r.marks = append(r.marks, tailMark{hi, r.crc})
}

// release returns r to the pool once its GET has returned.
func (r *tailRead) release() {
	r.alloc, r.buf = nil, nil
	tailReads.Put(r)
}

// DecodeSegment decodes one column segment holding rows rows of the
// column's type (c.Type). It never panics: a segment that does not decode
// is ErrCorrupt.
//
// A segment as Encode writes it is decoded without copying, but for a
// column stored narrower than declared (c.Stored), whose values are
// widened back to int64, exactly, into memory of their own (narrow.go):
// the array is of the declared type either way. Any other
// Arrow IPC file of one field is a valid segment too: a block object
// another program wrote may hold dictionary-encoded, large or view strings,
// list views, several record batches (decodeForeign). Such a segment is read
// by Arrow's own reader and converted, once, here, to the footer's type by
// transform.ConformArray, the one place where Arrow from outside SIG meets
// SIG's types; a segment of no encoding of the footer's type is ErrCorrupt.
func DecodeSegment(key string, c Column, seg []byte, rows int64) (arr arrow.Array, err error) {
	return DecodeSegmentInto(key, c, seg, rows, nil)
}

// DecodeSegmentInto is DecodeSegment decompressing a compressed segment's
// buffers into memory from alloc (make when nil), as FetchSegmentsInto
// fetches into it: the array is then a view of those buffers too, and the
// caller may recycle them only once nothing reads it (the reader's unit
// buffers). alloc's bytes need not be zeroed: every byte of a buffer handed
// to the array is written first.
func DecodeSegmentInto(key string, c Column, seg []byte, rows int64, alloc Alloc) (arr arrow.Array, err error) {
	t, err := transform.ParseType(c.Type)
	if err != nil {
		return nil, fmt.Errorf("block %s: column %s: %v: %w", key, c.Name, err, ErrCorrupt)
	}
	defer func() {
		if r := recover(); r != nil {
			arr, err = nil, fmt.Errorf("block %s: column %s: undecodable segment: %v: %w", key, c.Name, r, ErrCorrupt)
		}
	}()
	// The segment's own schema must be the footer's type: the value
	// buffers alone cannot tell a float64 from an int64 (or a padded int32
	// from either), and the footer is not checked against the segment by
	// the CRCs, which only say that the bytes are the ones written.
	got, ok := segmentType(seg)
	if !ok {
		return nil, fmt.Errorf("block %s: column %s: segment has no readable Arrow schema: %w", key, c.Name, ErrCorrupt)
	}
	// A column stored narrower than declared (Column.Stored, narrow.go)
	// is widened back to the footer's type as it is decoded: its segment
	// must hold exactly the stored type, which must widen to the declared
	// one.
	narrow, err := parseStored(t, c.Stored)
	if err != nil {
		return nil, fmt.Errorf("block %s: column %s: %v: %w", key, c.Name, err, ErrCorrupt)
	}
	want := t.String()
	if c.Stored != "" {
		want = c.Stored
		if got != want {
			return nil, fmt.Errorf("block %s: column %s: segment holds %s, footer says it is stored as %s: %w",
				key, c.Name, got, c.Stored, ErrCorrupt)
		}
	}
	if got == want {
		if arr, ok := decodeZeroCopy(seg, t, narrow, rows, alloc); ok {
			if !arrow.TypeEqual(arr.DataType(), t.ArrowType()) || int64(arr.Len()) != rows {
				arr.Release()
				return nil, fmt.Errorf("block %s: column %s: %s of %d rows, footer says %s of %d: %w",
					key, c.Name, arr.DataType(), arr.Len(), c.Type, rows, ErrCorrupt)
			}
			return arr, nil
		}
	}
	return decodeForeign(key, c, t, got, seg, rows)
}

// Arrow IPC framing and the flatbuffer slots read below (Message.fbs,
// Schema.fbs of the Arrow format).
const (
	ipcFileMagic    = "ARROW1\x00\x00"
	ipcContinuation = 0xFFFFFFFF

	msgSlotHeaderType = 6  // Message.header_type
	msgSlotHeader     = 8  // Message.header
	msgSlotBodyLength = 10 // Message.bodyLength
	headerSchema      = 1
	headerRecordBatch = 3

	schemaSlotFields  = 6  // Schema.fields
	fieldSlotTypeType = 8  // Field.type_type
	fieldSlotType     = 10 // Field.type
	fieldSlotChildren = 14 // Field.children
	intSlotBitWidth   = 4  // Int.bitWidth
	intSlotIsSigned   = 6  // Int.is_signed
	floatSlotPrecison = 4  // FloatingPoint.precision

	rbSlotLength      = 4  // RecordBatch.length
	rbSlotNodes       = 6  // RecordBatch.nodes: [FieldNode{length, null_count}]
	rbSlotBuffers     = 8  // RecordBatch.buffers: [Buffer{offset, length}]
	rbSlotCompression = 10 // RecordBatch.compression
	compSlotCodec     = 4  // BodyCompression.codec
	compSlotMethod    = 6  // BodyCompression.method
)

// message returns the metadata flatbuffer and the body of the encapsulated
// IPC message at off, and the offset after it.
func message(b []byte, off int) (meta, body []byte, next int, ok bool) {
	if off+8 > len(b) || binary.LittleEndian.Uint32(b[off:]) != ipcContinuation {
		return nil, nil, 0, false
	}
	n := int(int32(binary.LittleEndian.Uint32(b[off+4:])))
	if n <= 0 || off+8+n > len(b) {
		return nil, nil, 0, false
	}
	meta = b[off+8 : off+8+n]
	t := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	bodyLen := t.GetInt64Slot(msgSlotBodyLength, 0)
	start := off + 8 + n
	if bodyLen < 0 || int64(start)+bodyLen > int64(len(b)) {
		return nil, nil, 0, false
	}
	return meta, b[start : start+int(bodyLen) : start+int(bodyLen)], start + int(bodyLen), true
}

// decodeZeroCopy decodes a segment written by block.Encode (an IPC file: a
// schema message, one record batch) whose buffers it aliases, or, for a
// compressed batch, decompresses; int64 values stored as narrow (the
// zero storedInt: as int64) it widens.
// ok is false when the segment is of another shape or inconsistent. The
// footer's type, which DecodeSegment has checked against the segment's own
// schema (and narrow, the stored type), gives the column's type.
func decodeZeroCopy(seg []byte, t transform.Type, narrow storedInt, rows int64, alloc Alloc) (arrow.Array, bool) {
	if len(seg) < 8 || string(seg[:8]) != ipcFileMagic {
		return nil, false
	}
	smeta, _, next, ok := message(seg, 8)
	if !ok || headerType(smeta) != headerSchema {
		return nil, false
	}
	meta, body, _, ok := message(seg, next)
	if !ok || headerType(meta) != headerRecordBatch {
		return nil, false
	}
	msg := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	o := msg.Offset(msgSlotHeader)
	if o == 0 {
		return nil, false
	}
	rb := flatbuffers.Table{Bytes: meta, Pos: msg.Indirect(msg.Pos + flatbuffers.UOffsetT(o))}
	if rb.GetInt64Slot(rbSlotLength, -1) != rows {
		return nil, false
	}
	codec := codecNone
	if comp, ok := child(&rb, rbSlotCompression); ok {
		// BodyCompression{codec, method}: LZ4_FRAME or ZSTD, each buffer
		// on its own (BUFFER, the only method the format defines).
		codec = int(comp.GetInt8Slot(compSlotCodec, 0))
		if codec != codecLZ4 && codec != codecZSTD || comp.GetInt8Slot(compSlotMethod, 0) != 0 {
			return nil, false
		}
	}
	d := &zcDecoder{body: body, codec: codec, alloc: alloc, narrow: narrow,
		nodes: structs(&rb, rbSlotNodes), bufs: structs(&rb, rbSlotBuffers)}
	data, ok := d.array(t)
	if !ok || d.nodes.n != 0 || d.bufs.n != 0 {
		if data != nil {
			data.Release()
		}
		return nil, false
	}
	defer data.Release()
	return array.MakeFromData(data), true
}

// segmentType returns the type of the one field of a segment's schema
// message: a transform.Type's name when it is one, else a description of
// the Arrow type (for the error). ok is false when the segment does not
// start with a schema of one field. Out-of-range flatbuffer reads panic;
// DecodeSegment recovers.
func segmentType(seg []byte) (string, bool) {
	if len(seg) < 8 || string(seg[:8]) != ipcFileMagic {
		return "", false
	}
	smeta, _, _, ok := message(seg, 8)
	if !ok || headerType(smeta) != headerSchema {
		return "", false
	}
	msg := flatbuffers.Table{Bytes: smeta, Pos: flatbuffers.GetUOffsetT(smeta)}
	sch, ok := child(&msg, msgSlotHeader)
	if !ok {
		return "", false
	}
	fields, n := vector(&sch, schemaSlotFields)
	if n != 1 {
		return "", false
	}
	return fieldType(&sch, fields, 0), true
}

// fieldType names the type of the field whose offset is at pos in t's
// buffer, as transform.Type.String does for the types SIG stores.
func fieldType(t *flatbuffers.Table, pos flatbuffers.UOffsetT, depth int) string {
	f := flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(pos)}
	typ, hasType := child(&f, fieldSlotType)
	switch id := f.GetByteSlot(fieldSlotTypeType, 0); {
	case id == 2 && hasType: // Int
		bits, signed := typ.GetInt32Slot(intSlotBitWidth, 0), typ.GetBoolSlot(intSlotIsSigned, false)
		if signed {
			return fmt.Sprintf("int%d", bits)
		}
		return fmt.Sprintf("uint%d", bits)
	case id == 3 && hasType: // FloatingPoint
		return fmt.Sprintf("float%d", 16<<typ.GetInt16Slot(floatSlotPrecison, 0))
	case id == 5: // Utf8
		return transform.String.String()
	case id == 12 && depth < 2: // List
		children, n := vector(&f, fieldSlotChildren)
		if n != 1 {
			return "list"
		}
		return "list<" + fieldType(&f, children, depth+1) + ">"
	default:
		return fmt.Sprintf("Arrow type %d", id)
	}
}

// child returns the table in slot of t.
func child(t *flatbuffers.Table, slot flatbuffers.VOffsetT) (flatbuffers.Table, bool) {
	o := t.Offset(slot)
	if o == 0 {
		return flatbuffers.Table{}, false
	}
	return flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(t.Pos + flatbuffers.UOffsetT(o))}, true
}

// vector returns where the vector of tables in slot of t starts and its
// length.
func vector(t *flatbuffers.Table, slot flatbuffers.VOffsetT) (flatbuffers.UOffsetT, int) {
	o := t.Offset(slot)
	if o == 0 {
		return 0, 0
	}
	return t.Vector(flatbuffers.UOffsetT(o)), t.VectorLen(flatbuffers.UOffsetT(o))
}

func headerType(meta []byte) byte {
	t := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	return t.GetByteSlot(msgSlotHeaderType, 0)
}

// structVec is a flatbuffer vector of 16-byte structs of two int64s
// (FieldNode and Buffer), consumed front to back.
type structVec struct {
	b []byte
	n int
}

func structs(t *flatbuffers.Table, slot flatbuffers.VOffsetT) structVec {
	o := t.Offset(slot)
	if o == 0 {
		return structVec{}
	}
	start, n := t.Vector(flatbuffers.UOffsetT(o)), t.VectorLen(flatbuffers.UOffsetT(o))
	return structVec{b: t.Bytes[start : int(start)+16*n], n: n}
}

func (v *structVec) next() (a, b int64, ok bool) {
	if v.n == 0 {
		return 0, 0, false
	}
	a, b = int64(binary.LittleEndian.Uint64(v.b)), int64(binary.LittleEndian.Uint64(v.b[8:]))
	v.b, v.n = v.b[16:], v.n-1
	return a, b, true
}

type zcDecoder struct {
	body  []byte
	codec int   // codecNone, codecLZ4 or codecZSTD
	alloc Alloc // where decompressed and widened buffers go; nil: make
	// narrow is how the column's int64 values are stored (its own, or
	// its list's elements), the zero storedInt when as int64.
	narrow      storedInt
	nodes, bufs structVec
}

// buffer returns the next body buffer, which must hold at least min bytes.
// A compressed buffer is decompressed into memory of its own (its stated
// length at most max, which bounds what a corrupt length can allocate);
// one the caller does not use (use false) is skipped undecompressed.
func (d *zcDecoder) buffer(min, max int64, use bool) (*memory.Buffer, []byte, bool) {
	off, n, ok := d.bufs.next()
	if !ok || off < 0 || n < 0 || off+n > int64(len(d.body)) || off%8 != 0 {
		return nil, nil, false
	}
	if n == 0 {
		return nil, nil, min == 0
	}
	b := d.body[off : off+n : off+n]
	if d.codec != codecNone {
		if !use {
			return nil, nil, true
		}
		if b, ok = decompress(d.codec, b, max, d.alloc); !ok {
			return nil, nil, false
		}
	}
	if int64(len(b)) < min {
		return nil, nil, false
	}
	return memory.NewBufferBytes(b), b, true
}

// make returns n bytes of memory from the decoder's alloc, for a buffer
// every byte of which the caller writes.
func (d *zcDecoder) make(n int) []byte {
	if d.alloc != nil {
		return d.alloc(n)[:n]
	}
	return make([]byte, n)
}

// bound is the most a buffer of need bytes may state as its uncompressed
// length: writers pad buffers to 64 bytes (Arrow C++ may write an array's
// whole allocation).
func bound(need int64) int64 { return (need+63)&^63 + 64 }

// array decodes the next field node of type t (and its children).
func (d *zcDecoder) array(t transform.Type) (arrow.ArrayData, bool) {
	length, nulls, ok := d.nodes.next()
	if !ok || length < 0 || nulls < 0 || nulls > length || length > 1<<31-1 {
		return nil, false
	}
	vneed := (length + 7) / 8
	validity, vbytes, ok := d.buffer(0, bound(vneed), nulls > 0)
	if !ok || nulls > 0 && int64(len(vbytes)) < vneed {
		return nil, false
	}
	if nulls == 0 {
		validity = nil // as Arrow's reader: no nulls, no bitmap
	}
	n := int(length)
	switch t {
	case transform.Int64, transform.Float64:
		if t == transform.Int64 && d.narrow != (storedInt{}) {
			return d.widened(validity, n, int(nulls))
		}
		values, _, ok := d.buffer(8*length, bound(8*length), true)
		if !ok {
			return nil, false
		}
		return array.NewData(t.ArrowType(), n, []*memory.Buffer{validity, values}, nil, int(nulls), 0), true
	case transform.String:
		offsets, obytes, ok := d.buffer(4*(length+1), bound(4*(length+1)), true)
		if !ok {
			return nil, false
		}
		values, vb, ok := d.buffer(0, bound(lastOffset(obytes, n)), true)
		if !ok || !validOffsets(obytes, n, len(vb)) {
			return nil, false
		}
		return array.NewData(t.ArrowType(), n, []*memory.Buffer{validity, offsets, values}, nil, int(nulls), 0), true
	case transform.ListString, transform.ListInt64:
		offsets, obytes, ok := d.buffer(4*(length+1), bound(4*(length+1)), true)
		if !ok {
			return nil, false
		}
		child, ok := d.array(t.Elem())
		if !ok {
			return nil, false
		}
		if !validOffsets(obytes, n, child.Len()) {
			child.Release()
			return nil, false
		}
		data := array.NewData(t.ArrowType(), n, []*memory.Buffer{validity, offsets}, []arrow.ArrayData{child}, int(nulls), 0)
		child.Release()
		return data, true
	}
	return nil, false
}

// widened decodes the values of an int64 array of n rows stored as
// d.narrow: every value as stored (null slots' too) widened into memory
// of its own, 8n bytes, bounded as the stored buffer's.
func (d *zcDecoder) widened(validity *memory.Buffer, n, nulls int) (arrow.ArrayData, bool) {
	w := int64(d.narrow.bytes)
	_, stored, ok := d.buffer(w*int64(n), bound(w*int64(n)), true)
	if !ok {
		return nil, false
	}
	var values *memory.Buffer
	if n > 0 {
		out := d.make(8 * n)
		widen(d.narrow, out, stored, n)
		values = memory.NewBufferBytes(out)
	}
	return array.NewData(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{validity, values}, nil, nulls, 0), true
}

// lastOffset is the last of n+1 int32 offsets (how many value bytes they
// address), 0 when there are fewer; validOffsets checks them all.
func lastOffset(b []byte, n int) int64 {
	if len(b) < 4*(n+1) {
		return 0
	}
	return max(0, int64(int32(binary.LittleEndian.Uint32(b[4*n:]))))
}

// validOffsets checks n+1 int32 offsets: starting at 0 (what block.Encode
// writes), non-decreasing, ending within limit. A reader checks every
// offset of every string and list segment it fetches, so the loop takes
// no branch per offset: a decrease sets the sign bit of an accumulator.
// Four accumulators, each ORing the differences of its own pairs, keep the
// loop from waiting on one OR chain (0.66 to 0.49 ns per offset,
// BenchmarkValidOffsets, 2026-11-22).
func validOffsets(b []byte, n, limit int) bool {
	if n == 0 {
		return len(b) == 0 || len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0
	}
	if len(b) < 4*(n+1) {
		return false
	}
	offs := arrow.Int32Traits.CastFromBytes(b[:4*(n+1)]) // little-endian, as Arrow reads them
	if offs[0] != 0 {
		return false
	}
	var b0, b1, b2, b3 int64
	i := 0
	for ; i+4 < len(offs); i += 4 {
		o := offs[i : i+5 : i+5]
		b0 |= int64(o[1]) - int64(o[0])
		b1 |= int64(o[2]) - int64(o[1])
		b2 |= int64(o[3]) - int64(o[2])
		b3 |= int64(o[4]) - int64(o[3])
	}
	for ; i+1 < len(offs); i++ {
		b0 |= int64(offs[i+1]) - int64(offs[i])
	}
	return b0|b1|b2|b3 >= 0 && int64(offs[n]) <= int64(limit)
}

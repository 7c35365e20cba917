package arrowfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/endian"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// ReadColumns calls fn with every record batch of the Arrow IPC file at
// path, in order, each holding only the file's columns that names lists,
// in the file's order (a name the file lacks is absent, one it has twice
// is there twice: the caller's checks, transform.Conform's, say so).
//
// The file is memory-mapped, and the columns read are the file's own
// bytes: nothing is copied or allocated by the lengths the file states,
// and the other columns' pages are never touched. Arrow Go v15's
// FileReader copies every buffer of every column twice (the batch's body
// into a zeroed allocation, then each buffer out of it); Polars and
// pyarrow map the file as this does.
//
// The file is checked as ReadFile checks it (checkFile), and every field
// node and buffer a column reads is checked to lie within its batch, so
// that a file whose metadata lies is an error naming the file, the batch
// and what is wrong, never a crash. A file that shrinks while it is read
// (the pages of a mapping beyond its new end fault) is an error too: the
// faults are recovered on this goroutine (debug.SetPanicOnFault). A
// batch this does not decode in place (a compressed body, a column read
// that is dictionary-encoded, a big-endian file) is read by Arrow's reader
// as ReadFile reads it, then projected to the columns named.
//
// A record and its arrays are valid only during fn's call: the file is
// unmapped when ReadColumns returns, so an array kept past it would point
// at memory that is gone. A caller that keeps one copies it.
func ReadColumns(path string, names []string, fn func(i int, rec arrow.Record) error) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	idx, err := checkFile(f, size)
	if err != nil {
		return fmt.Errorf("%s: not a valid Arrow IPC file: %w", path, err)
	}
	data, unmap, err := mapFile(f, size)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Deferred first, so it runs last: after the reader is closed and the
	// last record released.
	defer func() {
		if uerr := unmap(); uerr != nil && err == nil {
			err = fmt.Errorf("%s: unmap: %w", path, uerr)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if !faultIn(p, data) {
				panic(p)
			}
			err = fmt.Errorf("%s: changed while being read: %v", path, p)
		}
	}()

	// Arrow's reader parses the schema (and reads any dictionaries, which
	// are small and copied) and reads the batches this does not decode.
	alloc := NewBudgetAllocator(0, "the file")
	var fr *ipc.FileReader
	err = guard(func() error {
		alloc.Reset(BudgetBase + BudgetPerByte*size)
		var err error
		fr, err = ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(alloc))
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: not a valid Arrow IPC file: %w", path, err)
	}
	defer guard(func() error { fr.Close(); return nil })
	if fr.NumRecords() != len(idx.batches) {
		return fmt.Errorf("%s: not a valid Arrow IPC file: %d record batches, the footer checked %d", path, fr.NumRecords(), len(idx.batches))
	}

	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	schema := fr.Schema()
	selected := make([]bool, schema.NumFields())
	var fields []arrow.Field
	inPlace := idx.bigEndian == endian.IsBigEndian
	for i, fd := range schema.Fields() {
		if want[fd.Name] {
			selected[i] = true
			fields = append(fields, fd)
			inPlace = inPlace && !hasDictionary(fd.Type)
		}
	}
	proj := arrow.NewSchema(fields, nil)

	for i, blk := range idx.batches {
		var rec arrow.Record
		err := guard(func() error {
			var err error
			if inPlace {
				rec, err = readInPlace(data, blk, schema, selected, proj)
			}
			if !inPlace || errors.Is(err, errNotInPlace) {
				alloc.Reset(BudgetBase + BudgetPerByte*size)
				rec, err = readCopied(fr, i, selected, proj)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: record batch %d: %w", path, i, err)
		}
		err = fn(i, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// faultIn reports whether p is the panic of a memory fault within data
// (debug.SetPanicOnFault's runtime.Error has the faulting address).
func faultIn(p any, data []byte) bool {
	f, ok := p.(interface{ Addr() uintptr })
	if !ok || len(data) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return f.Addr() >= base && f.Addr()-base < uintptr(len(data))
}

// hasDictionary reports whether t is or holds a dictionary-encoded type,
// whose values are in the file's dictionary batches: those columns are
// read by Arrow's reader, which resolves them.
func hasDictionary(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return true
	case arrow.ExtensionType:
		return hasDictionary(t.StorageType())
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if hasDictionary(f.Type) {
				return true
			}
		}
	}
	return false
}

// readCopied is batch i as Arrow's reader reads it (every column, copied),
// projected to the selected columns.
func readCopied(fr *ipc.FileReader, i int, selected []bool, proj *arrow.Schema) (arrow.Record, error) {
	full, err := fr.RecordAt(i)
	if err != nil {
		return nil, err
	}
	defer full.Release()
	var cols []arrow.Array
	for j, sel := range selected {
		if sel {
			cols = append(cols, full.Column(j))
		}
	}
	return array.NewRecord(proj, cols, full.NumRows()), nil
}

// errNotInPlace: a batch readInPlace leaves to Arrow's reader.
var errNotInPlace = errors.New("not decoded in place")

// The Arrow IPC message flatbuffer's slots (Message.fbs).
const (
	messageVersion    = 4  // Message.version: MetadataVersion, short
	messageHeaderType = 6  // Message.header_type: MessageHeader, ubyte
	messageHeader     = 8  // Message.header
	headerRecordBatch = 3  // MessageHeader.RecordBatch
	batchLength       = 4  // RecordBatch.length: long
	batchNodes        = 6  // RecordBatch.nodes: [FieldNode], struct of 2 longs
	batchBuffers      = 8  // RecordBatch.buffers: [Buffer], struct of 2 longs
	batchCompression  = 10 // RecordBatch.compression
	batchVariadic     = 12 // RecordBatch.variadicBufferCounts: [long]
	metadataV5        = 4  // MetadataVersion.V5

	continuation = 0xFFFFFFFF
)

// readInPlace decodes the selected columns of the record batch at blk
// with their buffers slices of data, as Arrow's reader lays them out
// (ipc/file_reader.go's arrayLoaderContext), skipping the others by their
// counts of field nodes and buffers. errNotInPlace: a compressed body.
func readInPlace(data []byte, blk fileBlock, schema *arrow.Schema, selected []bool, proj *arrow.Schema) (arrow.Record, error) {
	if blk.offset%8 != 0 || blk.meta%8 != 0 || blk.body%8 != 0 {
		return nil, fmt.Errorf("message at %d with metadata of %d and body of %d bytes: not 8-byte aligned", blk.offset, blk.meta, blk.body)
	}
	meta := data[blk.offset : blk.offset+blk.meta]
	// As Arrow's reader: the metadata length follows a continuation
	// marker, or (before Arrow 0.15) is the first word; the flatbuffer is
	// the rest of the block's metadata.
	switch binary.LittleEndian.Uint32(meta) {
	case 0:
	case continuation:
		meta = meta[8:]
	default:
		meta = meta[4:]
	}
	c := &checker{buf: meta}
	msg := c.root()
	if t := msg.GetByteSlot(messageHeaderType, 0); t != headerRecordBatch {
		return nil, fmt.Errorf("message of type %d, not a record batch", t)
	}
	rb, ok := c.table(msg, messageHeader)
	if !ok {
		return nil, fmt.Errorf("record batch message without its header")
	}
	if _, compressed := c.table(rb, batchCompression); compressed {
		return nil, errNotInPlace
	}
	d := &decoder{body: data[blk.offset+blk.meta : blk.offset+blk.meta+blk.body], v5: msg.GetInt16Slot(messageVersion, 0) >= metadataV5}
	start, n := c.vector(rb, batchNodes, 16)
	d.nodes = meta[start : start+16*n]
	start, n = c.vector(rb, batchBuffers, 16)
	d.buffers = meta[start : start+16*n]
	start, n = c.vector(rb, batchVariadic, 8)
	d.variadic = meta[start : start+8*n]
	if c.err != nil {
		return nil, c.err
	}
	rows := rb.GetInt64Slot(batchLength, 0)
	if rows < 0 {
		return nil, fmt.Errorf("%d rows", rows)
	}
	cols := make([]arrow.Array, 0, proj.NumFields())
	defer func() {
		for _, col := range cols {
			col.Release()
		}
	}()
	for j, fd := range schema.Fields() {
		ad, err := d.load(fd.Type, selected[j])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", fd.Name, err)
		}
		if selected[j] {
			cols = append(cols, array.MakeFromData(ad))
			ad.Release()
		}
	}
	return array.NewRecord(proj, cols, rows), nil
}

// decoder walks one record batch's field nodes and buffers in the order
// Arrow's writer lays them out: depth first, a field's own buffers before
// its children's.
type decoder struct {
	body                      []byte
	nodes, buffers, variadic  []byte // the flatbuffer's vectors of structs
	inode, ibuffer, ivariadic int
	v5                        bool // MetadataVersion V5: unions have no validity buffer
	depth                     int
}

// load returns the array of type t at the decoder's position and moves
// past it; with build false it only moves past it (nil data).
func (d *decoder) load(t arrow.DataType, build bool) (arrow.ArrayData, error) {
	if d.depth > MaxNesting {
		return nil, fmt.Errorf("fields nested more than %d deep", MaxNesting)
	}
	var nbuf int // buffers after the validity bitmap
	validity := true
	var children []arrow.DataType
	switch t := t.(type) {
	case *arrow.NullType:
		validity = false
	case *arrow.DictionaryType:
		if build {
			return nil, errNotInPlace // ReadColumns sends these to Arrow's reader
		}
		nbuf = 1 // the indices
	case arrow.ExtensionType:
		storage, err := d.load(t.StorageType(), build)
		if err != nil || !build {
			return nil, err
		}
		defer storage.Release()
		return array.NewData(t, storage.Len(), storage.Buffers(), storage.Children(), storage.NullN(), storage.Offset()), nil
	case *arrow.BinaryType, *arrow.StringType, *arrow.LargeBinaryType, *arrow.LargeStringType:
		nbuf = 2
	case arrow.BinaryViewDataType:
		// As Arrow's reader: no counts at all is none for every view.
		var v int64
		if len(d.variadic) > 0 {
			if d.ivariadic >= len(d.variadic)/8 {
				return nil, fmt.Errorf("variadic buffer count %d of %d", d.ivariadic, len(d.variadic)/8)
			}
			v = int64(binary.LittleEndian.Uint64(d.variadic[8*d.ivariadic:]))
		}
		d.ivariadic++
		if v < 0 || v > int64(len(d.buffers)/16) {
			return nil, fmt.Errorf("%d variadic buffers in a batch of %d", v, len(d.buffers)/16)
		}
		nbuf = 1 + int(v)
	case *arrow.ListType, *arrow.LargeListType, *arrow.MapType:
		nbuf = 1
		children = []arrow.DataType{t.(arrow.ListLikeType).Elem()}
	case *arrow.ListViewType, *arrow.LargeListViewType:
		nbuf = 2
		children = []arrow.DataType{t.(arrow.ListLikeType).Elem()}
	case *arrow.FixedSizeListType:
		children = []arrow.DataType{t.Elem()}
	case *arrow.StructType:
		for _, f := range t.Fields() {
			children = append(children, f.Type)
		}
	case *arrow.RunEndEncodedType:
		validity = !d.v5
		children = []arrow.DataType{t.RunEnds(), t.Encoded()}
	case arrow.UnionType:
		validity = !d.v5
		nbuf = 1
		if t.Mode() == arrow.DenseMode {
			nbuf = 2
		}
		for _, f := range t.Fields() {
			children = append(children, f.Type)
		}
	case arrow.FixedWidthDataType: // booleans, numbers, decimals, times, fixed-size binary
		nbuf = 1
	default:
		return nil, errNotInPlace
	}
	if d.inode >= len(d.nodes)/16 {
		return nil, fmt.Errorf("field node %d of %d", d.inode, len(d.nodes)/16)
	}
	length := int64(binary.LittleEndian.Uint64(d.nodes[16*d.inode:]))
	nulls := int64(binary.LittleEndian.Uint64(d.nodes[16*d.inode+8:]))
	d.inode++
	if length < 0 || nulls < 0 || nulls > length || length > int64(maxInt) {
		return nil, fmt.Errorf("field node of %d rows, %d of them null", length, nulls)
	}
	var bufs []*memory.Buffer
	if validity {
		// As Arrow's reader: no bitmap is read when nothing is null.
		b, err := d.buffer(build && nulls > 0)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
	} else if _, ok := t.(*arrow.NullType); !ok {
		bufs = append(bufs, nil)
	}
	for range nbuf {
		b, err := d.buffer(build)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
	}
	var kids []arrow.ArrayData
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	d.depth++
	for _, ct := range children {
		k, err := d.load(ct, build)
		if err != nil {
			d.depth--
			return nil, err
		}
		if build {
			kids = append(kids, k)
		}
	}
	d.depth--
	if !build {
		return nil, nil
	}
	if _, ok := t.(arrow.UnionType); ok {
		nulls = 0 // as Arrow's reader: a union's nulls are its children's
	}
	return array.NewData(t, int(length), bufs, kids, int(nulls), 0), nil
}

const maxInt = int(^uint(0) >> 1)

// buffer returns the next buffer of the batch, a slice of the body, when
// read; either way it moves past it. A buffer of no bytes is nil, as
// Arrow's reader makes it. One not 8-byte aligned (the format requires it;
// a writer that ignored it) is copied, since Arrow's arrays view buffers
// as slices of their values.
func (d *decoder) buffer(read bool) (*memory.Buffer, error) {
	i := d.ibuffer
	if i >= len(d.buffers)/16 {
		return nil, fmt.Errorf("buffer %d of %d", i, len(d.buffers)/16)
	}
	d.ibuffer++
	if !read {
		return nil, nil
	}
	off := int64(binary.LittleEndian.Uint64(d.buffers[16*i:]))
	n := int64(binary.LittleEndian.Uint64(d.buffers[16*i+8:]))
	if off < 0 || n < 0 || off > int64(len(d.body)) || n > int64(len(d.body))-off {
		return nil, fmt.Errorf("buffer %d at %d of %d bytes in a body of %d", i, off, n, len(d.body))
	}
	if n == 0 {
		return memory.NewBufferBytes(nil), nil
	}
	b := d.body[off : off+n : off+n]
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		b = bytes.Clone(b)
	}
	return memory.NewBufferBytes(b), nil
}

package arrowfile

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// MaxNesting is the deepest field nesting accepted, as Arrow's own reader
// bounds nested arrays (kMaxNestingDepth).
const MaxNesting = 64

// Budget bounds what Arrow may allocate while reading one record batch:
// BudgetBase bytes plus BudgetPerByte times the file's size. An
// uncompressed batch needs about its own bytes; a compressed one as much
// as its buffers expand to.
const (
	BudgetBase    = 256 << 20
	BudgetPerByte = 64
)

// ReadFile calls fn with every record batch of the Arrow IPC file at path,
// in order. A record is valid only during its call. Errors of the file
// name it; fn's errors are returned as they are.
func ReadFile(path string, fn func(i int, rec arrow.Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return Read(f, st.Size(), path, fn)
}

// Read is ReadFile over the size bytes of r (an Arrow IPC file held in
// memory: a segment of a block object another program wrote), named name
// in its errors.
func Read(r io.ReaderAt, size int64, name string, fn func(i int, rec arrow.Record) error) error {
	if _, err := checkFile(r, size); err != nil {
		return fmt.Errorf("%s: not a valid Arrow IPC file: %w", name, err)
	}
	alloc := NewBudgetAllocator(0, "the file")
	var fr *ipc.FileReader
	err := guard(func() error {
		alloc.Reset(BudgetBase + BudgetPerByte*size)
		var err error
		fr, err = ipc.NewFileReader(io.NewSectionReader(r, 0, size), ipc.WithAllocator(alloc))
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: not a valid Arrow IPC file: %w", name, err)
	}
	defer guard(func() error { fr.Close(); return nil })
	for i := 0; i < fr.NumRecords(); i++ {
		var rec arrow.Record
		err := guard(func() error {
			alloc.Reset(BudgetBase + BudgetPerByte*size)
			var err error
			rec, err = fr.Record(i)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: record batch %d: %w", name, i, err)
		}
		if err := fn(i, rec); err != nil {
			return err
		}
	}
	return nil
}

// guard runs fn, turning a panic into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return fn()
}

// BudgetAllocator is an Arrow allocator that hands out Go heap until what it
// has handed out since its budget was set exceeds it, then panics: Arrow's
// readers size allocations by the lengths the bytes claim, and the panic,
// which the caller recovers, turns a lie about them into an error rather
// than an out-of-memory crash. Safe for concurrent use.
type BudgetAllocator struct {
	mu   sync.Mutex
	left int64
	what string
}

// NewBudgetAllocator returns an allocator with a budget of n bytes for
// reading what (named in its panic: "the file").
func NewBudgetAllocator(n int64, what string) *BudgetAllocator {
	return &BudgetAllocator{left: n, what: what}
}

// Reset sets the budget to n bytes.
func (b *BudgetAllocator) Reset(n int64) {
	b.mu.Lock()
	b.left = n
	b.mu.Unlock()
}

func (b *BudgetAllocator) spend(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 0 || int64(n) > b.left {
		panic(fmt.Sprintf("buffers of %d bytes, more than %s can hold", n, b.what))
	}
	b.left -= int64(n)
}

func (b *BudgetAllocator) Allocate(size int) []byte {
	b.spend(size)
	return memory.DefaultAllocator.Allocate(size)
}

func (b *BudgetAllocator) Reallocate(size int, buf []byte) []byte {
	if size > len(buf) {
		b.spend(size - len(buf))
	}
	return memory.DefaultAllocator.Reallocate(size, buf)
}

func (b *BudgetAllocator) Free(buf []byte) { memory.DefaultAllocator.Free(buf) }

// The Arrow file format's trailer and the flatbuffer slots checked below
// (File.fbs and Schema.fbs of the Arrow format).
const (
	magic = "ARROW1"

	footerSchema        = 6  // Footer.schema
	footerDictionaries  = 8  // Footer.dictionaries: [Block]
	footerRecordBatches = 10 // Footer.recordBatches: [Block]
	footerMetadata      = 12 // Footer.custom_metadata: [KeyValue]
	blockSize           = 24 // struct Block {offset: long; metaDataLength: int; bodyLength: long}

	schemaEndianness = 4 // Schema.endianness: short, 0 little, 1 big
	schemaFields     = 6 // Schema.fields: [Field]
	schemaMetadata   = 8 // Schema.custom_metadata
	schemaFeatures   = 10

	fieldName       = 4  // Field.name
	fieldTypeType   = 8  // Field.type_type
	fieldType       = 10 // Field.type
	fieldDictionary = 12 // Field.dictionary
	fieldChildren   = 14 // Field.children: [Field]
	fieldMetadata   = 16 // Field.custom_metadata

	typeUnion    = 14 // Type.Union
	unionTypeIDs = 6  // Union.typeIds: [int]

	keyValueKey   = 4
	keyValueValue = 6
)

// fileBlock is a message of the file as the footer places it: its
// metadata (length prefix included) at offset, its body after it.
type fileBlock struct {
	offset, meta, body int64
}

// footerIndex is what checkFile learned of a valid footer: where the
// record batches are and the byte order of their buffers.
type footerIndex struct {
	batches   []fileBlock
	bigEndian bool
}

// checkFile checks the trailer and the footer of the file as Arrow's
// reader will read them, and returns the footer's index of record batches,
// each within the file.
func checkFile(f io.ReaderAt, size int64) (idx footerIndex, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("footer: %v", p)
		}
	}()
	const tail = len(magic) + 4
	if size < int64(2*len(magic)+4+tail) {
		return idx, fmt.Errorf("%d bytes, too short", size)
	}
	var tr [tail]byte
	if _, err := f.ReadAt(tr[:], size-int64(tail)); err != nil {
		return idx, err
	}
	if string(tr[4:]) != magic {
		return idx, fmt.Errorf("no %s magic at the end", magic)
	}
	n := int64(flatbuffers.GetUint32(tr[:4]))
	if n <= 0 || n > size-int64(tail)-int64(len(magic)) {
		return idx, fmt.Errorf("footer of %d bytes in a file of %d", n, size)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-int64(tail)-n); err != nil {
		return idx, err
	}
	c := &checker{buf: buf, fields: int(n) / 8}
	footer := c.root()
	for _, slot := range []flatbuffers.VOffsetT{footerDictionaries, footerRecordBatches} {
		start, count := c.vector(footer, slot, blockSize)
		for i := range count {
			b := start + i*blockSize
			off := int64(flatbuffers.GetUint64(buf[b:]))
			meta := int64(int32(flatbuffers.GetUint32(buf[b+8:])))
			body := int64(flatbuffers.GetUint64(buf[b+16:]))
			if off < 0 || meta < 8 || body < 0 || off > size || meta > size-off || body > size-off-meta {
				return idx, fmt.Errorf("block %d at %d: metadata of %d and body of %d bytes in a file of %d", i, off, meta, body, size)
			}
			if slot == footerRecordBatches {
				idx.batches = append(idx.batches, fileBlock{off, meta, body})
			}
		}
	}
	c.keyValues(footer, footerMetadata)
	if schema, ok := c.table(footer, footerSchema); ok {
		idx.bigEndian = schema.GetInt16Slot(schemaEndianness, 0) == 1
		c.vector(schema, schemaFeatures, 8)
		c.keyValues(schema, schemaMetadata)
		c.fieldVector(schema, schemaFields, 1)
	}
	return idx, c.err
}

// checker walks a footer's flatbuffer; out-of-range reads panic (slice
// bounds), recovered by checkFile. fields is how many more fields may be
// visited, counting a shared child each time Arrow's reader will visit it.
type checker struct {
	buf    []byte
	fields int
	err    error
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

func (c *checker) root() *flatbuffers.Table {
	return c.at(int(flatbuffers.GetUOffsetT(c.buf)))
}

// at is the table at pos, its vtable checked to lie in the buffer.
func (c *checker) at(pos int) *flatbuffers.Table {
	if pos < 0 || pos+4 > len(c.buf) {
		panic(fmt.Sprintf("table at %d", pos))
	}
	t := &flatbuffers.Table{Bytes: c.buf, Pos: flatbuffers.UOffsetT(pos)}
	vt := int64(pos) - int64(flatbuffers.GetSOffsetT(c.buf[pos:]))
	if vt < 0 || vt+4 > int64(len(c.buf)) || vt+int64(flatbuffers.GetVOffsetT(c.buf[vt:])) > int64(len(c.buf)) {
		panic(fmt.Sprintf("vtable of the table at %d", pos))
	}
	return t
}

func (c *checker) table(t *flatbuffers.Table, slot flatbuffers.VOffsetT) (*flatbuffers.Table, bool) {
	o := t.Offset(slot)
	if o == 0 {
		return nil, false
	}
	return c.at(int(t.Indirect(flatbuffers.UOffsetT(o) + t.Pos))), true
}

// vector returns the start and length of the vector in slot, checked to
// lie in the buffer.
func (c *checker) vector(t *flatbuffers.Table, slot flatbuffers.VOffsetT, elem int) (start, n int) {
	o := t.Offset(slot)
	if o == 0 {
		return 0, 0
	}
	s, l := int64(t.Vector(flatbuffers.UOffsetT(o))), int64(t.VectorLen(flatbuffers.UOffsetT(o)))
	if s < 0 || s > int64(len(c.buf)) || l > (int64(len(c.buf))-s)/int64(elem) {
		c.fail("vector of %d elements of %d bytes at %d in a footer of %d bytes", l, elem, s, len(c.buf))
		return 0, 0
	}
	return int(s), int(l)
}

func (c *checker) keyValues(t *flatbuffers.Table, slot flatbuffers.VOffsetT) {
	start, n := c.vector(t, slot, 4)
	for i := range n {
		kv := c.at(int(t.Indirect(flatbuffers.UOffsetT(start + 4*i))))
		c.vector(kv, keyValueKey, 1)
		c.vector(kv, keyValueValue, 1)
	}
}

// fieldVector checks the fields in slot of t, at nesting depth.
func (c *checker) fieldVector(t *flatbuffers.Table, slot flatbuffers.VOffsetT, depth int) {
	start, n := c.vector(t, slot, 4)
	if n > 0 && depth > MaxNesting {
		c.fail("fields nested more than %d deep", MaxNesting)
		return
	}
	for i := 0; i < n && c.err == nil; i++ {
		if c.fields--; c.fields < 0 {
			c.fail("more fields than the footer has bytes for")
			return
		}
		f := c.at(int(t.Indirect(flatbuffers.UOffsetT(start + 4*i))))
		c.vector(f, fieldName, 1)
		c.keyValues(f, fieldMetadata)
		c.table(f, fieldDictionary)
		if typ, ok := c.table(f, fieldType); ok && f.GetByteSlot(fieldTypeType, 0) == typeUnion {
			c.vector(typ, unionTypeIDs, 4)
		}
		c.fieldVector(f, fieldChildren, depth+1)
	}
}

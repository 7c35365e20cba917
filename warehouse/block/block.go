package block

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// FormatVersion is the version of the object layout written by Encode.
const FormatVersion = 1

// Magic ends every block object.
const Magic = "SIGBLK01"

// TrailerSize is the size of the fixed trailer at the end of an object.
const TrailerSize = 16

// MaxFooterSize bounds the footer a reader accepts.
const MaxFooterSize = 16 << 20

// Sentinel errors.
var (
	// ErrCorrupt: the object's bytes do not form a valid block (bad magic,
	// checksum mismatch, undecodable segment, inconsistent metadata). It
	// wraps objstore.ErrCorrupt when the object store detected it.
	ErrCorrupt = objstore.ErrCorrupt
	// ErrNoColumn: a requested column is not in the block.
	ErrNoColumn = errors.New("no such column")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// KafkaRange is the part of a Kafka partition a raw block was cut from:
// First and Last are inclusive offsets. The block holds every record of its
// window in that range (records of other windows in the range are in other
// blocks).
type KafkaRange struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	First     int64  `json:"first"`
	Last      int64  `json:"last"`
}

// Overlaps reports whether r and o are ranges of the same partition that
// share an offset.
func (r KafkaRange) Overlaps(o KafkaRange) bool {
	return r.Topic == o.Topic && r.Partition == o.Partition && r.First <= o.Last && o.First <= r.Last
}

// Column locates one column segment inside a block object.
type Column struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	CRC32C uint32 `json:"crc32c"`
	// Compression is the segment's Arrow IPC buffer compression, as the
	// writer chose it (EncodeOptions); absent when uncompressed, as in
	// objects written before segments could be compressed. Readers go by
	// the segment itself.
	Compression Compression `json:"compression,omitempty"`
	// InputVersion is, in a pack (Meta.Pack), the input version of the
	// member whose column this is (blockref.Memo; absent: 1, as
	// blockref.Stored writes it). Absent in every other object.
	InputVersion int64 `json:"input_version,omitempty"`
	// Stored is the type the segment holds when the writer stored the
	// column narrower than its declared Type (EncodeOptions.Narrow): an
	// int64 column as int8, int16, int32, uint8, uint16 or uint32, a
	// list<int64> column as a list of one of those. Readers widen it back
	// to Type, exactly (narrow.go). Absent when the segment holds Type, as
	// in every object written before columns could be narrowed; a stored
	// type that does not widen to Type is ErrCorrupt.
	Stored string `json:"stored,omitempty"`
}

// Meta is a block's metadata: what the footer of its object holds, plus
// where the object and its footer are (Size, FooterOffset, FooterLength,
// Checksum), which the catalog keeps so that readers need no extra request.
type Meta struct {
	Format int    `json:"format"`
	Key    string `json:"key"`
	ID     string `json:"id"`
	// Source is the raw event source; for a memoized block, the source of
	// the raw block it is derived from.
	Source string `json:"source"`
	// ComponentKey is set on memo objects of one component only (hex in
	// the footer, absent on raw blocks and packs).
	ComponentKey canon.Key `json:"component_key,omitzero"`
	// Pack marks a packed memo object (issue 28, pack.go): the memo
	// columns of many components of one raw block version, each named by
	// its component key (MemberColumn) with its input version, beside the
	// raw block's event_id. ID and Version are that raw block version's.
	Pack bool `json:"pack,omitempty"`
	// WindowStart and WindowLength (microseconds) are the event-time
	// window the block belongs to.
	WindowStart  int64 `json:"window_start"`
	WindowLength int64 `json:"window_length"`
	// MinEventTime and MaxEventTime are the event-time range of the rows
	// (inclusive, microseconds since the epoch).
	MinEventTime int64 `json:"min_event_time"`
	MaxEventTime int64 `json:"max_event_time"`
	Rows         int64 `json:"rows"`
	// SchemaFingerprint is transform.Schema.Fingerprint of the source.
	SchemaFingerprint string `json:"schema_fingerprint"`
	// Kafka is the range of records the block was cut from (raw blocks
	// written by ingestion).
	Kafka *KafkaRange `json:"kafka,omitempty"`
	// Late marks a block of a window that was already sealed when its
	// records arrived: a new version of that window's data.
	Late bool `json:"late,omitempty"`
	// Generation is the ingestion incarnation that wrote the block; of two
	// blocks covering the same records, the later generation wins (see
	// warehouse/catalog Rebuild).
	Generation int64    `json:"generation,omitempty"`
	Columns    []Column `json:"columns"`

	// Version is the block's version: 0 (absent, as in every object
	// written before blocks had versions) means 1. A change to a sealed
	// block (late rows, updated columns, deleted rows) never rewrites its
	// object: it writes version N+1 whole under RawKey(source,
	// blockref.New(id, N+1)), with the same id. Ref reads it.
	Version int64 `json:"version,omitempty"`
	// ColumnVersions gives, per raw column, the block version at which
	// its values last changed; a column absent here has not changed since
	// version 1. An update bumps the columns it overwrites; late rows and
	// deleted rows change the row set, so they bump every column (data
	// derived from a column must stay row-aligned with it).
	ColumnVersions map[string]int64 `json:"column_versions,omitempty"`
	// Changes is the provenance of this version: every change applied to
	// version 1 to make it, oldest first (so the newest version alone says
	// which Kafka records the block holds).
	Changes []Change `json:"changes,omitempty"`

	// Parts is the lineage of a compacted block (issue 28; warehouse/
	// compact): the small blocks of one partition and window, each at the
	// version it was compacted at, whose rows this block's version 1 holds
	// in this order (part i's rows right after part i-1's). Absent on every
	// block ingestion sealed, so their objects are unchanged byte for byte.
	Parts []Part `json:"parts,omitempty"`
	// CompactedInto marks a tombstone: the version of a block that
	// compaction ended, without rows or object, whose rows are now in the
	// block of that id (same source). It is never in a footer, only in the
	// catalog, which keeps it so that snapshots after the compaction see
	// the block gone while older ones still see its last version.
	CompactedInto string `json:"compacted_into,omitempty"`

	// Seq is the catalog sequence number at which this version was
	// catalogued (warehouse/catalog); never in the footer.
	Seq int64 `json:"seq,omitempty"`

	// Object placement; not part of the footer itself.
	Size         int64  `json:"size,omitempty"`
	FooterOffset int64  `json:"footer_offset,omitempty"`
	FooterLength int64  `json:"footer_length,omitempty"`
	Checksum     uint32 `json:"checksum,omitempty"`
}

// Change is one applied change buffer: the change records of one Kafka
// partition and event-time window between offsets First and Last
// (inclusive) that made version Version of a block.
type Change struct {
	Version   int64  `json:"version"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	First     int64  `json:"first"`
	Last      int64  `json:"last"`
	// LateRows were appended, UpdatedRows had columns overwritten,
	// DeletedRows were removed.
	LateRows    int64 `json:"late_rows,omitempty"`
	UpdatedRows int64 `json:"updated_rows,omitempty"`
	DeletedRows int64 `json:"deleted_rows,omitempty"`
	// Columns are the columns whose values this change made new (every
	// column when rows were appended or removed).
	Columns []string `json:"columns,omitempty"`
}

// Part is one block of a compacted block's lineage (Meta.Parts): the block
// at the version that was compacted, its rows, and the Kafka records that
// version held (its own range and the spans of the changes that made its
// versions), which the compacted block now covers.
type Part struct {
	ID      string       `json:"id"`
	Version int64        `json:"version,omitempty"`
	Rows    int64        `json:"rows"`
	Spans   []KafkaRange `json:"spans,omitempty"`
}

// Ref is the part's block version.
func (p Part) Ref() blockref.Ref { return blockref.New(p.ID, p.Version) }

// IsTombstone reports whether m is the version that ended a compacted
// block (CompactedInto): it has no rows and no object.
func (m *Meta) IsTombstone() bool { return m.CompactedInto != "" }

// Spans are the Kafka records this version of a raw block holds: its own
// range and the span of every change since version 1 (Changes), or, for a
// compacted block, its parts' spans and its own changes'. The catalog's
// coverage of a block is these.
func (m *Meta) Spans() []KafkaRange {
	var out []KafkaRange
	if len(m.Parts) > 0 {
		for _, p := range m.Parts {
			out = append(out, p.Spans...)
		}
	} else if m.Kafka != nil {
		out = append(out, *m.Kafka)
	}
	for _, ch := range m.Changes {
		out = append(out, KafkaRange{Topic: ch.Topic, Partition: ch.Partition, First: ch.First, Last: ch.Last})
	}
	return out
}

// Ref is the raw block version the metadata describes (Version 0, in
// objects written before versions, is version 1: blockref.New).
func (m *Meta) Ref() blockref.Ref { return blockref.New(m.ID, m.Version) }

// MemoRef is the memo block a memo object's metadata describes: in a memo
// object's footer Version is the input version of the component's data
// (warehouse/blockref.Memo), not a raw version.
func (m *Meta) MemoRef() blockref.Memo { return blockref.NewMemo(m.ID, m.Version) }

// IsMemo reports whether the metadata is a memo object's: one component's
// or a pack's.
func (m *Meta) IsMemo() bool { return m.ComponentKey != (canon.Key{}) || m.Pack }

// ColumnVersion is the version at which column name's values last changed.
func (m *Meta) ColumnVersion(name string) int64 {
	return InputVersionOf(m.ColumnVersions, []string{name})
}

// InputVersion is the version of the data a reader of columns sees: the
// largest ColumnVersion among them (1 when none changed). Two versions of a
// block with the same InputVersion for a set of columns hold the same rows
// and the same values in those columns.
func (m *Meta) InputVersion(columns []string) int64 {
	return InputVersionOf(m.ColumnVersions, columns)
}

// InputVersionOf is InputVersion over column versions cv (a column absent
// from cv, or at 0, is at version 1): the one rule Meta and the matching
// frontend's blocks share.
func InputVersionOf(cv map[string]int64, columns []string) int64 {
	v := int64(1)
	for _, c := range columns {
		v = max(v, cv[c])
	}
	return v
}

// Clone returns a copy of m sharing no slices or maps with it.
func (m Meta) Clone() Meta {
	m.Columns = slices.Clone(m.Columns)
	if m.Kafka != nil {
		k := *m.Kafka
		m.Kafka = &k
	}
	if m.ColumnVersions != nil {
		cv := make(map[string]int64, len(m.ColumnVersions))
		for k, v := range m.ColumnVersions {
			cv[k] = v
		}
		m.ColumnVersions = cv
	}
	if m.Changes != nil {
		ch := make([]Change, len(m.Changes))
		for i, c := range m.Changes {
			c.Columns = slices.Clone(c.Columns)
			ch[i] = c
		}
		m.Changes = ch
	}
	if m.Parts != nil {
		ps := make([]Part, len(m.Parts))
		for i, p := range m.Parts {
			p.Spans = slices.Clone(p.Spans)
			ps[i] = p
		}
		m.Parts = ps
	}
	return m
}

// Column returns the directory entry of the named column.
func (m *Meta) Column(name string) (Column, bool) {
	for _, c := range m.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// Validate checks the metadata's internal consistency (not the object).
func (m *Meta) Validate() error {
	if err := ValidateName("block id", m.ID); err != nil {
		return err
	}
	if !m.IsMemo() || m.Pack {
		if err := ValidateName("source", m.Source); err != nil {
			return err
		}
	}
	if err := m.validatePack(); err != nil {
		return err
	}
	if m.Rows < 0 || m.WindowLength < 0 || m.MinEventTime > m.MaxEventTime && m.Rows > 0 {
		return fmt.Errorf("block %s: inconsistent rows/window/event range", m.ID)
	}
	if m.Kafka != nil && (m.Kafka.First > m.Kafka.Last || m.Kafka.First < 0) {
		return fmt.Errorf("block %s: invalid kafka range %+v", m.ID, *m.Kafka)
	}
	if m.Version < 0 {
		return fmt.Errorf("block %s: negative version %d", m.ID, m.Version)
	}
	for c, v := range m.ColumnVersions {
		if v < 1 || v > m.Ref().Version() {
			return fmt.Errorf("block %s version %d: column %s has version %d", m.ID, m.Ref().Version(), c, v)
		}
	}
	for _, c := range m.Changes {
		if c.Version < 2 || c.Version > m.Ref().Version() || c.First > c.Last || c.First < 0 {
			return fmt.Errorf("block %s version %d: invalid change %+v", m.ID, m.Ref().Version(), c)
		}
	}
	return nil
}

// writeSeeker is an in-memory io.WriteSeeker for the IPC file writer.
type writeSeeker struct {
	buf []byte
	pos int
}

func (w *writeSeeker) Write(p []byte) (int, error) {
	if need := w.pos + len(p); need > len(w.buf) {
		w.buf = slices.Grow(w.buf, need-len(w.buf))[:need]
	}
	copy(w.buf[w.pos:], p)
	w.pos += len(p)
	return len(p), nil
}

func (w *writeSeeker) Seek(off int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = off
	case io.SeekCurrent:
		abs = int64(w.pos) + off
	case io.SeekEnd:
		abs = int64(len(w.buf)) + off
	}
	if abs < 0 {
		return 0, errors.New("block: negative seek")
	}
	w.pos = int(abs)
	return abs, nil
}

// Encode lays rec out as a block object. meta supplies the identity and
// provenance fields (Key, ID, Source, window, Kafka, Late, Generation,
// SchemaFingerprint); Encode fills Format, Rows, Columns and the placement
// fields and returns the completed Meta with the object bytes. The output is
// a deterministic function of meta and rec.
func Encode(meta Meta, rec arrow.Record) ([]byte, Meta, error) {
	return encode(meta, rec, nil, EncodeOptions{})
}

// EncodeWith is Encode with its segments encoded as opts says (compressed).
func EncodeWith(meta Meta, rec arrow.Record, opts EncodeOptions) ([]byte, Meta, error) {
	return encode(meta, rec, nil, opts)
}

// encode is Encode laying the object out in buf's memory when it is large
// enough.
func encode(meta Meta, rec arrow.Record, buf []byte, opts EncodeOptions) ([]byte, Meta, error) {
	if err := meta.Validate(); err != nil {
		return nil, Meta{}, err
	}
	meta.Format = FormatVersion
	meta.Rows = rec.NumRows()
	if lo, hi, ok := eventTimeRange(rec); ok {
		meta.MinEventTime, meta.MaxEventTime = lo, hi
	}
	given := meta.Columns // a pack's members' input versions (EncodePack)
	meta.Columns = make([]Column, 0, rec.NumCols())
	if n := estimateSize(rec); cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	w := &writeSeeker{buf: buf[:0]}
	var sum uint32 // CRC-32C of w.buf[:done]
	done := 0
	for i, f := range rec.Schema().Fields() {
		t, ok := transform.TypeOfArrow(f.Type)
		if !ok {
			return nil, Meta{}, fmt.Errorf("block %s: column %s has unsupported type %s", meta.ID, f.Name, f.Type)
		}
		if _, dup := meta.Column(f.Name); dup {
			return nil, Meta{}, fmt.Errorf("block %s: column %s appears twice", meta.ID, f.Name)
		}
		// Pad to 8 bytes so that every segment starts aligned.
		for len(w.buf)%8 != 0 {
			w.buf = append(w.buf, 0)
		}
		start := len(w.buf)
		w.pos = start
		seg := &offsetWriter{w: w, base: int64(start)}
		// The column as stored: narrowed when opts asks for it and its
		// values allow (narrow.go), else as it is.
		field, stored := f, ""
		var k storedInt
		if opts.narrows(f.Name) {
			if k, ok = narrowest(t, rec.Column(i).Data()); ok {
				field.Type, stored = narrowType(f.Type, k), storedName(t, k)
			}
		}
		sch := arrow.NewSchema([]arrow.Field{field}, nil)
		comp := opts.of(f.Name)
		ipcOpts := []ipc.Option{ipc.WithSchema(sch)}
		if o, err := comp.ipcOption(); err != nil {
			return nil, Meta{}, fmt.Errorf("block %s: column %s: %w", meta.ID, f.Name, err)
		} else if o != nil {
			ipcOpts = append(ipcOpts, o)
		}
		fw, err := ipc.NewFileWriter(seg, ipcOpts...)
		if err != nil {
			return nil, Meta{}, fmt.Errorf("block %s: column %s: %w", meta.ID, f.Name, err)
		}
		col := rec.Column(i)
		if stored != "" {
			col = narrowArray(col, field.Type, k)
		}
		colRec := array.NewRecord(sch, []arrow.Array{col}, rec.NumRows())
		if stored != "" {
			col.Release() // colRec holds the narrow array now
		}
		err = fw.Write(colRec)
		colRec.Release()
		if err == nil {
			err = fw.Close()
		}
		if err != nil {
			return nil, Meta{}, fmt.Errorf("block %s: column %s: %w", meta.ID, f.Name, err)
		}
		b := w.buf[start:]
		segCRC := crc32.Checksum(b, castagnoli)
		dcol := Column{Name: f.Name, Type: t.String(),
			Offset: int64(start), Length: int64(len(b)), CRC32C: segCRC, Compression: comp, Stored: stored}
		if i < len(given) && given[i].Name == f.Name {
			dcol.InputVersion = given[i].InputVersion
		}
		meta.Columns = append(meta.Columns, dcol)
		// The object's checksum grows piece by piece from the ones just
		// computed (the padding is hashed, the segment combined), so the
		// object's bytes are read once, not twice.
		sum = crc32.Update(sum, castagnoli, w.buf[done:start])
		sum = objstore.ChecksumCombine(sum, segCRC, int64(len(b)))
		done = len(w.buf)
	}
	footer, err := footerJSON(meta)
	if err != nil {
		return nil, Meta{}, err
	}
	meta.FooterOffset = int64(len(w.buf))
	meta.FooterLength = int64(len(footer))
	out := append(w.buf, footer...)
	var tr [TrailerSize]byte
	binary.LittleEndian.PutUint32(tr[0:], uint32(len(footer)))
	binary.LittleEndian.PutUint32(tr[4:], crc32.Checksum(footer, castagnoli))
	copy(tr[8:], Magic)
	out = append(out, tr[:]...)
	meta.Size = int64(len(out))
	meta.Checksum = crc32.Update(sum, castagnoli, out[done:])
	return out, meta, nil
}

// eventTimeRange returns the min and max of rec's event_time column, if it
// has a non-empty one.
func eventTimeRange(rec arrow.Record) (lo, hi int64, ok bool) {
	idx := rec.Schema().FieldIndices(transform.ColEventTime)
	if len(idx) != 1 || rec.NumRows() == 0 {
		return 0, 0, false
	}
	col, isInt := rec.Column(idx[0]).(*array.Int64)
	if !isInt {
		return 0, 0, false
	}
	vals := col.Int64Values()
	lo, hi = vals[0], vals[0]
	for _, v := range vals[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi, true
}

// offsetWriter presents the tail of a writeSeeker starting at base as a
// WriteSeeker of its own, so each IPC segment has offsets relative to itself.
type offsetWriter struct {
	w    *writeSeeker
	base int64
}

func (o *offsetWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
func (o *offsetWriter) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart {
		off += o.base
	}
	abs, err := o.w.Seek(off, whence)
	return abs - o.base, err
}

func estimateSize(rec arrow.Record) int {
	n := 4096
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += b.Len() + 512
			}
		}
		for _, ch := range c.Data().Children() {
			for _, b := range ch.Buffers() {
				if b != nil {
					n += b.Len() + 64
				}
			}
		}
	}
	return n
}

// footerJSON is the footer: Meta without the placement fields. Version 1
// is written as no version at all, so that the object of a block (or memo
// block) that never changed is byte for byte what it was before versions
// (warehouse/blockref reads the absent version as 1).
func footerJSON(m Meta) ([]byte, error) {
	m.Size, m.FooterOffset, m.FooterLength, m.Checksum, m.Seq = 0, 0, 0, 0, 0
	m.Version = blockref.Stored(m.Version)
	return json.Marshal(m)
}

func corrupt(key, format string, args ...any) error {
	return fmt.Errorf("block %s: %s: %w", key, fmt.Sprintf(format, args...), ErrCorrupt)
}

// parseTrailer returns the footer length from the trailer bytes.
func parseTrailer(key string, tr []byte) (footerLen int64, footerCRC uint32, err error) {
	if len(tr) != TrailerSize || string(tr[8:]) != Magic {
		return 0, 0, corrupt(key, "bad trailer magic")
	}
	n := int64(binary.LittleEndian.Uint32(tr[0:]))
	if n <= 0 || n > MaxFooterSize {
		return 0, 0, corrupt(key, "footer length %d out of range", n)
	}
	return n, binary.LittleEndian.Uint32(tr[4:]), nil
}

// parseFooter decodes and checks a footer read from an object of size bytes
// whose footer starts at footerOff.
func parseFooter(key string, footer []byte, crc uint32, size, footerOff int64) (Meta, error) {
	if crc32.Checksum(footer, castagnoli) != crc {
		return Meta{}, corrupt(key, "footer checksum mismatch")
	}
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(footer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Meta{}, corrupt(key, "footer: %v", err)
	}
	if m.Format != FormatVersion {
		return Meta{}, corrupt(key, "format version %d, this reader knows %d", m.Format, FormatVersion)
	}
	if err := m.Validate(); err != nil {
		return Meta{}, corrupt(key, "footer: %v", err)
	}
	var end int64
	for _, c := range m.Columns {
		t, err := transform.ParseType(c.Type)
		if err != nil {
			return Meta{}, corrupt(key, "column %s: %v", c.Name, err)
		}
		if _, err := parseStored(t, c.Stored); err != nil {
			return Meta{}, corrupt(key, "column %s: %v", c.Name, err)
		}
		if c.Offset < end || c.Length <= 0 || c.Offset+c.Length > footerOff {
			return Meta{}, corrupt(key, "column %s: segment [%d,+%d) out of place", c.Name, c.Offset, c.Length)
		}
		end = c.Offset + c.Length
	}
	m.Key = key
	m.Size = size
	m.FooterOffset = footerOff
	m.FooterLength = int64(len(footer))
	return m, nil
}

// Decode parses a whole block object (as read with objstore.Get, which has
// already checked the object's checksum) and returns its metadata and rows.
func Decode(key string, data []byte) (Meta, arrow.Record, error) {
	if len(data) < TrailerSize {
		return Meta{}, nil, corrupt(key, "object of %d bytes is shorter than the trailer", len(data))
	}
	size := int64(len(data))
	flen, fcrc, err := parseTrailer(key, data[size-TrailerSize:])
	if err != nil {
		return Meta{}, nil, err
	}
	foff := size - TrailerSize - flen
	if foff < 0 {
		return Meta{}, nil, corrupt(key, "footer length %d exceeds object size %d", flen, size)
	}
	m, err := parseFooter(key, data[foff:size-TrailerSize], fcrc, size, foff)
	if err != nil {
		return Meta{}, nil, err
	}
	m.Checksum = objstore.Checksum(data)
	names := make([]string, len(m.Columns))
	segs := make([][]byte, len(m.Columns))
	for i, c := range m.Columns {
		names[i] = c.Name
		segs[i] = data[c.Offset : c.Offset+c.Length]
		if crc32.Checksum(segs[i], castagnoli) != c.CRC32C {
			return Meta{}, nil, corrupt(key, "column %s: checksum mismatch", c.Name)
		}
	}
	rec, err := assemble(key, m, names, segs)
	return m, rec, err
}

// assemble decodes the named segments, whose checksums the caller has
// checked, into one record, columns in order.
func assemble(key string, m Meta, names []string, segs [][]byte) (arrow.Record, error) {
	fields := make([]arrow.Field, len(names))
	cols := make([]arrow.Array, len(names))
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i, name := range names {
		c, _ := m.Column(name)
		arr, err := DecodeSegment(key, c, segs[i], m.Rows)
		if err != nil {
			release()
			return nil, err
		}
		cols[i] = arr
		fields[i] = arrow.Field{Name: name, Type: arr.DataType(),
			Nullable: name != transform.ColEventID && name != transform.ColEventTime}
	}
	md := arrow.NewMetadata([]string{"sig.block", "sig.schema_fingerprint"}, []string{m.ID, m.SchemaFingerprint})
	rec := array.NewRecord(arrow.NewSchema(fields, &md), cols, m.Rows)
	release()
	return rec, nil
}

// Write encodes rec and stores it at meta.Key. It returns the completed
// metadata (see Encode).
func Write(ctx context.Context, store objstore.Writer, meta Meta, rec arrow.Record) (Meta, error) {
	return WriteWith(ctx, store, meta, rec, EncodeOptions{})
}

// WriteWith is Write with its segments encoded as opts says (compressed).
func WriteWith(ctx context.Context, store objstore.Writer, meta Meta, rec arrow.Record, opts EncodeOptions) (Meta, error) {
	// The object's bytes live only until the PUT returns: a worker writing
	// a memo object every few milliseconds reuses the memory instead of
	// having the runtime clear megabytes for each one.
	bp, _ := encodeBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data, m, err := encode(meta, rec, *bp, opts)
	if err == nil && m.Key == "" {
		err = fmt.Errorf("block %s: no object key", m.ID)
	}
	if err != nil {
		encodeBufs.Put(bp) // nothing was sent from it
		return Meta{}, err
	}
	if _, err := store.PutChecksummed(ctx, m.Key, data, m.Checksum, map[string]string{"Sig-Block": m.ID}); err != nil {
		// Not reused: after a failed request the HTTP transport (or one of
		// minio-go's multipart workers) may still be reading the bytes.
		return Meta{}, err
	}
	if cap(data) <= maxPooledEncodeBuf {
		*bp = data[:0]
		encodeBufs.Put(bp)
	}
	return m, nil
}

// encodeBufs holds Write's object buffers (*[]byte) between writes; one over
// maxPooledEncodeBuf is left to the garbage collector.
var encodeBufs sync.Pool

const maxPooledEncodeBuf = 64 << 20

// ReadBlock reads a whole block object, verifying the object checksum and
// every column's, and returns its metadata and all its columns.
func ReadBlock(ctx context.Context, store objstore.Reader, key string) (Meta, arrow.Record, error) {
	data, _, err := store.Get(ctx, key)
	if err != nil {
		return Meta{}, nil, err
	}
	return Decode(key, data)
}

// ReadFooter first fetches the last probe bytes of an object, enough for
// the footer of any block seen so far: minProbe, grown (up to maxProbe) to
// the largest footer and trailer this process has read, rounded up to a
// power of two. A larger footer takes a second request. Ordinary footers
// are one or two KiB (a JSON line per column), and a probe of 64 KiB cost
// a reader more than parsing the footer.
const (
	minProbe = 8 << 10
	maxProbe = 1 << 20
)

var (
	probeSize atomic.Int64
	probeBufs sync.Pool // *[]byte of cap >= the probe size when put
)

func init() { probeSize.Store(minProbe) }

// growProbe makes later probes cover a footer of flen bytes.
func growProbe(flen int64) {
	want := min(int64(1)<<bits.Len64(uint64(flen+TrailerSize-1)), maxProbe)
	for {
		cur := probeSize.Load()
		if want <= cur || probeSize.CompareAndSwap(cur, want) {
			return
		}
	}
}

// ReadFooter reads only the metadata of the block object at key (one ranged
// request, two if the footer is unusually large).
func ReadFooter(ctx context.Context, store objstore.Reader, key string) (Meta, error) {
	probe := int(probeSize.Load())
	bp, _ := probeBufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < probe {
		b := make([]byte, probe)
		bp = &b
	}
	// The probe buffer goes back to the pool when ReadFooter returns:
	// nothing returned aliases it (parseFooter copies what it decodes, and
	// errors are formatted).
	defer probeBufs.Put(bp)
	n, info, err := store.GetSuffixInto(ctx, key, (*bp)[:probe])
	if err != nil {
		return Meta{}, err
	}
	tail := (*bp)[:n]
	if len(tail) < TrailerSize {
		return Meta{}, corrupt(key, "object of %d bytes is shorter than the trailer", len(tail))
	}
	flen, fcrc, err := parseTrailer(key, tail[len(tail)-TrailerSize:])
	if err != nil {
		return Meta{}, err
	}
	foff := info.Size - TrailerSize - flen
	if foff < 0 {
		return Meta{}, corrupt(key, "footer length %d exceeds object size %d", flen, info.Size)
	}
	var footer []byte
	if int64(len(tail)) >= flen+TrailerSize {
		footer = tail[int64(len(tail))-TrailerSize-flen : len(tail)-TrailerSize]
	} else {
		footer = make([]byte, flen)
		if err := store.GetRangeInto(ctx, key, foff, footer, nil); err != nil {
			return Meta{}, err
		}
		growProbe(flen)
	}
	m, err := parseFooter(key, footer, fcrc, info.Size, foff)
	if err != nil {
		return Meta{}, err
	}
	m.Checksum = info.Checksum
	return m, nil
}

// ReadColumns reads event_id and the named columns of a block, fetching only
// their segments with ranged requests (in parallel), and verifies each
// segment's checksum. The record's columns are event_id followed by cols in
// the order given (event_id is not repeated if named). meta must come from
// the catalog or ReadFooter; if its column directory is empty, the footer is
// read first.
func ReadColumns(ctx context.Context, store objstore.Reader, meta Meta, cols []string) (arrow.Record, error) {
	meta, names, err := columnsToRead(ctx, store, meta, cols)
	if err != nil {
		return nil, err
	}
	segs, err := FetchSegments(ctx, store, meta, names)
	if err != nil {
		return nil, err
	}
	return assemble(meta.Key, meta, names, segs)
}

// columnsToRead returns meta with its column directory (from the footer if
// meta has none) and the columns a read of cols returns: event_id, then
// cols in order, each once.
func columnsToRead(ctx context.Context, store objstore.Reader, meta Meta, cols []string) (Meta, []string, error) {
	if len(meta.Columns) == 0 {
		m, err := ReadFooter(ctx, store, meta.Key)
		if err != nil {
			return meta, nil, err
		}
		meta = m
	}
	names := []string{transform.ColEventID}
	for _, c := range cols {
		if !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	return meta, names, nil
}

package ingest

import (
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/warehouse/block"
)

// DefaultBlockBytes is Config.BlockBytes' default (and sigd's and `sigctl
// ingest`'s --block-bytes): the size a block is sealed at, the one the
// sweep bench/block-bytes.sh chooses (bench/block-bytes.txt: the smallest
// size whose SIG reader CPU per example is within 10% of the lowest, 103
// ns at 16 MiB against 865 at 256 KiB, with worker CPU per block under a
// second, 184 ms; docs/ARCHITECTURE.md, "Block size by bytes"). The script
// says when this constant is no longer its choice.
const DefaultBlockBytes = 16 << 20

// Block size by bytes (issue 28). What a block costs its readers is per
// object and per byte, not per row: a reader pays a request per object it
// fetches (and per memo object), and a worker a task per block; rows of the
// Ads schema range from a few hundred bytes to kilobytes. So ingestion cuts
// blocks at an estimate of their encoded size. The estimate is what the
// Arrow IPC segments' buffers will hold, read from the buffer's builders
// (values, offsets; validity and per-segment headers are small beside
// them), before any segment compression.

// bytesCheckRows is how often, in rows, a buffer's estimate is taken: the
// estimate walks every column's builder, and a block overshoots its target
// by at most this many rows.
const bytesCheckRows = 64

// full reports whether buffer b is due to be sealed by its size: its rows
// and changes reached RowsPerBlock, or its estimated encoded bytes
// BlockBytes.
func (in *Ingester) full(b *buffer) bool {
	if in.cfg.RowsPerBlock > 0 && b.rows+b.nchanges >= in.cfg.RowsPerBlock {
		return true
	}
	if in.cfg.BlockBytes <= 0 || (b.rows+b.nchanges)%bytesCheckRows != 0 {
		return false
	}
	return bufferBytes(b) >= in.cfg.BlockBytes
}

// room reports whether nrows of buffer b's new rows may be appended to
// stored block m (late events, warehouse/ingest's "Changes") without
// making it larger than a sealed block may be.
func (in *Ingester) room(m block.Meta, b *buffer, nrows int) bool {
	if in.cfg.RowsPerBlock > 0 && m.Rows+int64(nrows) > int64(in.cfg.RowsPerBlock) {
		return false
	}
	if in.cfg.BlockBytes <= 0 || b.rows == 0 {
		return true
	}
	add := recordBuilderBytes(b.b) * int64(nrows) / int64(b.rows)
	return m.Size+add <= in.cfg.BlockBytes
}

// bufferBytes estimates the encoded bytes of b: its rows and its updates'
// values.
func bufferBytes(b *buffer) int64 {
	n := recordBuilderBytes(b.b)
	if b.ub != nil {
		n += recordBuilderBytes(b.ub)
	}
	return n
}

// recordBuilderBytes estimates the bytes of the Arrow buffers rb's record
// will have.
func recordBuilderBytes(rb *array.RecordBuilder) int64 {
	var n int64
	for _, f := range rb.Fields() {
		n += builderBytes(f)
	}
	return n
}

// builderBytes estimates the bytes of the Arrow buffers of one column
// builder's array: values, and offsets for strings and lists (one 4-byte
// offset a row), recursively for a list's values.
func builderBytes(b array.Builder) int64 {
	n := int64(b.Len())
	switch x := b.(type) {
	case *array.StringBuilder:
		return int64(x.DataLen()) + 4*(n+1)
	case *array.BinaryBuilder:
		return int64(x.DataLen()) + 4*(n+1)
	case *array.ListBuilder:
		return 4*(n+1) + builderBytes(x.ValueBuilder())
	case *array.Int64Builder, *array.Float64Builder:
		return 8 * n
	}
	return 8 * n
}

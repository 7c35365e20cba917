package block

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression is the Arrow IPC buffer compression of a column segment
// (the Arrow format's BodyCompression: every buffer of the record batch
// compressed on its own, prefixed with its uncompressed length), so a
// compressed segment is still a standard Arrow IPC file that pyarrow, Arrow
// JS or DuckDB read. The segment itself says whether and how it is
// compressed; the footer's Column.Compression repeats it for writers (a memo
// object's event_id segment is encoded as its raw block's, so that the two
// stay byte-identical: see memo.Runner).
type Compression string

const (
	Uncompressed Compression = ""
	LZ4Frame     Compression = "lz4_frame"
	ZSTD         Compression = "zstd"
)

// DefaultCompression is what ingestion and workers write unless told
// otherwise (--segment-compression): uncompressed, because compression
// costs the readers CPU per example, the quantity SIG's memoization exists
// to cut (bench/compression.txt: LZ4 frame +29%, ZSTD +62%, medians of
// per-run ratios), for bytes (LZ4 -45%, ZSTD -65%) that matter only where
// storage, a memo budget or the network binds; docs/ARCHITECTURE.md,
// "Segment compression".
const DefaultCompression = Uncompressed

// ParseCompression reads a compression flag: none, lz4 (lz4_frame) or zstd.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return Uncompressed, nil
	case "lz4", "lz4_frame":
		return LZ4Frame, nil
	case "zstd":
		return ZSTD, nil
	}
	return "", fmt.Errorf("segment compression %q: want none, lz4 or zstd", s)
}

// Flag is the name a flag or a report gives c.
func (c Compression) Flag() string {
	switch c {
	case Uncompressed:
		return "none"
	case LZ4Frame:
		return "lz4"
	}
	return string(c)
}

func (c Compression) ipcOption() (ipc.Option, error) {
	switch c {
	case LZ4Frame:
		return ipc.WithLZ4(), nil
	case ZSTD:
		return ipc.WithZstd(), nil
	case Uncompressed:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown segment compression %q", string(c))
}

// EncodeOptions are how EncodeWith and WriteWith encode a block's segments.
type EncodeOptions struct {
	// Compression of every segment; Columns overrides it per column name.
	Compression Compression
	Columns     map[string]Compression
	// Narrow names the columns stored in the narrowest integer type that
	// holds all their values, when they are int64 or list<int64> and one
	// narrower than int64 does (Column.Stored; narrow.go). Memo objects
	// narrow their value column (workers/memo); raw blocks and a memo
	// object's event_id keep their types (doc.go, "Narrow stored types").
	Narrow []string
}

func (o EncodeOptions) narrows(name string) bool { return slices.Contains(o.Narrow, name) }

func (o EncodeOptions) of(name string) Compression {
	if c, ok := o.Columns[name]; ok {
		return c
	}
	return o.Compression
}

// Arrow's BodyCompression codecs (Message.fbs CompressionType).
const (
	codecNone = -1
	codecLZ4  = 0
	codecZSTD = 1
)

// zstdDecoder decompresses ZSTD buffers (DecodeAll is safe for concurrent
// use); its memory is bounded as the buffers' declared lengths are.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxTail))

var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

// decompress decodes one compressed body buffer (an int64 uncompressed
// length, then the codec's frame) of at most max bytes. A length of -1 is
// a buffer the writer left uncompressed: its bytes are returned as they
// are (aliased). ok is false for anything else that does not hold exactly
// the length it states. The output goes into alloc's memory (make when
// nil), all of it written.
func decompress(codec int, b []byte, max int64, alloc Alloc) ([]byte, bool) {
	if len(b) < 8 {
		return nil, false
	}
	n := int64(binary.LittleEndian.Uint64(b))
	src := b[8:]
	if n == -1 {
		return src, true
	}
	if n < 0 || n > max {
		return nil, false
	}
	var out []byte
	if alloc != nil {
		out = alloc(int(n))[:n]
	} else {
		out = make([]byte, n)
	}
	switch codec {
	case codecZSTD:
		got, err := zstdDecoder.DecodeAll(src, out[:0])
		if err != nil || int64(len(got)) != n || n > 0 && &got[0] != &out[0] {
			return nil, false
		}
	case codecLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		r.Reset(bytes.NewReader(src))
		_, err := io.ReadFull(r, out)
		if err == nil {
			var one [1]byte
			if k, _ := r.Read(one[:]); k != 0 {
				err = fmt.Errorf("longer than stated")
			}
		}
		r.Reset(nil)
		lz4Readers.Put(r)
		if err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	return out, true
}

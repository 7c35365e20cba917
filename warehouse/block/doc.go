// Package block owns the layout of block objects in the warehouse: raw event
// blocks (raw/<source>/<block>.arrow) and memoized outputs, packed
// (memo/packs/<source>/<block>/<id>.arrow, issue 28) or, as written before
// packs, one per component (memo/<component-key>/<block>.arrow), their
// metadata, object keys, and the readers SIG workers and input readers use
// (paper IV.A: workers "fetch raw data, apply transformations, and store
// results back in the warehouse").
//
// # Object layout
//
// One object per block. A block holds one table (an arrow.Record); each
// column is stored as its own standalone Arrow IPC file (the "ARROW1" file
// format, one record batch, one field), and the segments are laid end to end:
//
//	offset 0      segment of column 0   (Arrow IPC file: schema {col0}, 1 batch)
//	              segment of column 1
//	              ...
//	              segment of column n-1
//	FooterOffset  footer: JSON of Meta (block metadata, and per column its
//	              name, type, offset, length and CRC-32C; compression and
//	              stored type when not the defaults)
//	size-16       trailer: footer length (uint32 LE), footer CRC-32C
//	              (uint32 LE), magic "SIGBLK01"
//
// Why not one Arrow IPC file with all columns: Arrow's file footer locates
// record batches, not columns, so reading one column of an ordinary IPC file
// means reading and parsing the batch metadata of the whole file first and
// decoding buffers by hand. With one segment per column, a reader that knows
// the column directory (from the catalog, or from the footer) fetches exactly
// the columns it needs with one ranged GET each, and every segment is read by
// the stock Arrow IPC reader. Any segment cut out of the object is a valid
// Arrow file on its own.
//
// # Checksums
//
// Every segment's CRC-32C is in the footer and is verified on every read,
// ranged or whole. The footer's own CRC is in the trailer. The whole object's
// CRC is kept by objstore in the object's metadata and verified on full reads.
// Any mismatch, truncation or undecodable segment is ErrCorrupt, with the
// object (and column) named, and so is a segment whose own Arrow schema is
// no encoding of the type the footer gives its column (a checksum only says
// the bytes are the ones written, not that the writer was SIG's).
//
// A footer's checksums do not show that its values are the right ones: a
// writer with a bug writes a wrong footer and checksums over it. So a memo
// object's footer is also checked for what its reader expects, its
// component, block, columns, type and rows (CheckMemo, memo.go). Readers
// check every memo object with it and sigd an object a reader reported, so
// that a footer a reader refuses is one sigd finds corrupt and recomputes
// (issue 27).
//
// # Packs
//
// Paper IV.A memoizes each component per block; stored one object per
// (component, block), a unit of ten memo inputs cost ten footers and ten
// GETs besides the raw block's, and every object repeated the block's
// event_id segment (issue 28). A pack (pack.go) holds the memo columns of
// many components (or memo nodes) of one raw block version in one object
// of the layout above, as Parquet and Iceberg keep many column chunks in
// one file addressed by offset:
//
//	offset 0      event_id segment, encoded as the raw block's (the same bytes)
//	              segment of member 0, named by its component key in hex
//	              ...
//	FooterOffset  footer: Meta with Pack set, ID and Version of the raw block
//	              version the members are row-aligned with, and per member
//	              column its Column (offset, length, CRC-32C, type) and
//	              InputVersion, the member's memo block (absent: 1)
//
// Members are laid out by group (WritePacks: the caller groups the columns
// pipelines read together), then key, and cut into several packs where
// their columns would pass PackOptions.MaxBytes (DefaultPackBytes), a
// group kept whole unless it alone passes it (PlanPacks,
// testdata/packs.txt). Every pack is a new object, under a random id
// (NewPackKey): never overwritten, so a crash between writing a pack and
// naming it in the matching cache leaves only an object no entry names
// (the evictor sweeps it), and a reader may keep a pack's footer by its
// key. A memo entry names its pack and its column (MemberColumn, the
// component key's hex); CheckMember is the footer check of one member for
// readers, workers reading memo nodes and sigd's verification alike. A
// pack is never rewritten to drop a member: an evicted member's entry goes
// and the pack is deleted once no entry names it (package matching keeps
// the index; eviction and versions delete).
//
// Objects written before packs keep serving: a memo entry without a
// column names one component's object, memo/<key>/<block>[.v<N>].arrow of
// event_id and MemoColumn, which CheckMember checks with CheckMemo
// (testdata/memo-v1, frozen, TestMemoWrittenBeforeServes).
//
// # Compression
//
// A segment may use Arrow IPC's own buffer compression (LZ4 frame or ZSTD:
// the record batch's BodyCompression, each buffer compressed on its own and
// prefixed with its uncompressed length), so that it stays a standard Arrow
// IPC file any Arrow implementation reads. The writer chooses it per column
// (EncodeOptions, Compression; ingestion and workers take
// --segment-compression, default DefaultCompression) and the footer repeats
// it (Column.Compression, absent when uncompressed, so objects written
// before are unchanged byte for byte); readers go by the segment itself, so
// every object, old or new, compressed or not, decodes. The zero-copy
// decoder decompresses each buffer once into memory of its own (a stated
// length beyond what the buffer's rows need is ErrCorrupt before anything
// is allocated) and aliases the rest; a buffer the writer left uncompressed
// (length -1) is aliased. CRCs are of the stored (compressed) bytes, so
// FetchTail and the ranged reads check them as before, while the bytes
// arrive. bench/compression.sh measures stored bytes, worker and reader CPU
// for each (docs/ARCHITECTURE.md, "Segment compression", says why the
// default is what it is).
//
// # Narrow stored types
//
// A memo column is stored in the narrowest integer type its values allow
// (issue 28): an int64 column, or a list<int64> column's elements, as
// int8, uint8, int16, uint16, int32 or uint32, the narrowest that holds
// every value the array addresses (null slots' values included; at one
// width, signed unless the values need the top bit). A hash into
// 1,000,003 buckets takes 4 bytes a token instead of 8, a bucketize or a
// length 1 byte a row. The writer chooses the columns (EncodeOptions.Narrow;
// workers/memo narrows a memo object's value column) and the footer says
// what it did: Column.Type stays the declared type, Column.Stored names
// the stored one ("int32", "list<int16>"), absent when the column is
// stored as declared, so every object written before, and every column
// that does not narrow, is byte for byte what it was. The segment is an
// ordinary Arrow IPC file of the stored type (pyarrow reads an int32
// column), so foreign readers see the narrow type and the footer tells
// them the declared one. SIG's zero-copy decoder widens the values back
// to int64 as it decodes, into memory of its own (from alloc), keeping
// the validity bitmap and list offsets as stored, so readers serve the
// bytes they would have served from a column stored as declared (a
// narrow segment of another layout, which SIG does not write, is
// converted by transform.ConformArray as any foreign segment is).
// Checksums are of the stored bytes. A stored type that does not widen to
// the declared one, or that the segment does not hold, is ErrCorrupt
// naming the column. A reader built before Column.Stored existed refuses
// such a footer (unknown field) as corrupt: readers are upgraded before
// the workers that write narrow objects.
//
// Raw blocks keep their types, and so does a memo object's event_id: raw
// columns are read by every worker task and every LIG reader, which would
// all pay the widening; their bytes are mostly strings, and event times
// (microseconds since the epoch) need 64 bits, as do event ids other than
// the generator's small sequence; and a memo object's event_id segment
// must stay the raw block's bytes, which is how readers see the two
// row-aligned from the footers alone (SameSegment). Floats never narrow:
// a float64 column that holds integers would have to keep -0 and NaN
// payloads bit for bit, and the ops that produce floats rarely give
// integers. bench/narrow.sh measures memo bytes per example and reader
// CPU per example with and without narrowing.
//
// # Blocks other programs write
//
// The footer gives each column's DSL type ("string", "list<int64>"); the
// segment's own Arrow schema says how it is encoded. SIG's encoder writes
// each type as transform.Type.ArrowType in one record batch, and those
// segments (compressed or not) are decoded without copying. A raw block
// object another program
// wrote (events ingested by something other than warehouse/ingest, with
// Arrow JS's or pyarrow's encodings) may hold any Arrow IPC file of one
// column instead: dictionary-encoded, large or view strings, list views,
// several record batches. DecodeSegment reads such a segment with Arrow's
// own reader (internal/arrowfile: bounded by the segment's size, never a
// panic) and converts it, once, to the footer's type with
// transform.ConformArray, so workers (memo objects) and readers (LIG)
// compute from it exactly what they compute from the plain encoding
// (TestRunnerForeignEncodings in workers/memo, on objects pyarrow wrote).
//
// # Block ids
//
// A raw block's id is derived from its event-time window and the Kafka
// offsets it covers (ID): "20260101T000000Z-p00003-<first>-<last>" with
// 20-digit offsets. Ids therefore sort in event order within a source
// (window first), and a block re-sealed after an ingestion crash from the same
// records gets the same id and overwrites an identical object (see
// warehouse/ingest for the exactly-once argument). A memoized block has the
// id of the raw block it is row-aligned with.
//
// # Versions
//
// A raw block changes after it was sealed only by new versions (late rows,
// updated columns, deleted rows; warehouse/ingest): version N>=2 is a whole
// object of its own at RawKey(source, blockref.New(id, N)),
// raw/<source>/<id>.v<N>.arrow, with the same id; version 1 keeps
// raw/<source>/<id>.arrow. Meta.Ref is the version as a blockref.Ref. Its
// footer carries Version, ColumnVersions (per column, the version at which
// its values last changed; absent: 1) and Changes (the Kafka records that
// made each version since 1). All three are omitted when empty, so a
// version-1 object is byte for byte what it was before versions existed.
// InputVersion(columns) is the version of the data a reader of those
// columns sees: a component reading only columns a change left alone reads
// the same values at both versions. (Memo data is per input version: a
// pack's member records its own, Column.InputVersion, in a pack of any raw
// version with that input version for the member's columns; an object
// written before packs is MemoKey(k, blockref.Memo),
// memo/<key>/<id>[.v<N>].arrow. Which entries exist is the matching
// cache's concern.)
//
// # Planned reads
//
// A reader that wants several columns of one object reads them with an
// ObjectReader (fetch.go): as few requests as the layout allows, the way
// columnar readers read Parquet. The object's footer comes from a small
// bounded cache (FooterCache) or from one speculative tail read of the
// object's last TailRead bytes, which for an object no larger holds
// everything; the wanted segments are fetched in ranges coalesced as
// Arrow's ReadRangeCache coalesces them (PlanSpans: holes up to HoleLimit
// read, ranges up to RangeLimit), limits chosen from the measured cost of
// a request against its bytes (BenchmarkRangeCost in package reader). A
// cached footer is checked by the checksums of everything read with it
// and, where it lies within the hole limit of the wanted segments, read
// back and compared; a read from a stale one is made again from the
// object, so that an object written again under its key is never read
// with another's footer.
//
// # Segment cache
//
// SIG runs one task per (component, block), and a fleet's components read
// overlapping columns of a block. SegmentCache keeps the segments a worker
// process fetched last (ReadColumnsCached), keyed by object and column
// directory entry, so that the tasks of a block, which sigd queues together,
// fetch each column once.
//
// What this package does not own: which blocks exist (warehouse/catalog),
// how raw blocks are cut from the event stream (warehouse/ingest), what memo
// columns contain (transform, workers).
package block

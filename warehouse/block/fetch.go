package block

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/sigdata/sig/warehouse/objstore"
)

// This file plans the reads of several columns of one block object as few
// requests as it can (issue 28: a request, not a byte, is what a small
// unit mostly pays for), the way columnar readers read Parquet: the footer
// index with one speculative tail read, and the wanted column chunks in
// ranges coalesced as Arrow's ReadRangeCache coalesces them (a hole limit
// and a range size limit).
//
//   - The footer of an object read before is kept (FooterCache, a small
//     bounded LRU): the object's wanted segments are then fetched at once,
//     coalesced (Spans), which for the columns of one unit in one object
//     is usually one request.
//   - Otherwise the last TailRead bytes of the object are read first, in
//     one request that holds the footer and, where the object is no
//     larger, everything else; what it does not hold is fetched, coalesced,
//     once the footer says where it is. A caller that knows where the
//     wanted bytes start reads from there to the end instead
//     (ObjectRead.From).
//
// Why a cache may hold footers at all: block objects are written whole and
// never modified in place, and a raw block's key names its version (a
// change is a new object, RawKey). Yet an object can be written again
// under its key: a memo object repaired after a reader found it corrupt,
// or recomputed after eviction, a raw block ingested again by a later
// generation. A cached footer may then be stale. Such a footer is not
// trusted blindly:
//
//   - every segment read with it is checked against its CRC-32C, so the
//     bytes used are those the footer describes, whatever the object holds
//     now;
//   - when the footer lies within HoleLimit of the last wanted segment (a
//     memo object's value segment is right before it; a small raw block's
//     columns are), the range is extended to the object's end and the
//     footer read back is compared with the cached one (its length and
//     CRC-32C, and the trailer's): an object whose footer changed, even
//     where the segments read did not (its event ids reordered, its footer
//     damaged), is not served from the old footer;
//   - any failure of a read that started from a cached footer (either
//     check, a range past the end, a footer the caller refuses) drops the
//     entry and reads the object again from its tail, uncached; only the
//     uncached read's outcome is reported.
//
// So a stale footer costs a read, never wrong bytes, and a cache miss is
// only slower: readers stay stateless (paper IV.B). What a reader with a
// cached footer does not see is a change to an object's footer far from
// the segments it reads, or to segments it does not read; it serves the
// bytes its footer's checksums vouch for until the entry ages out, and
// an uncached reader sees the change.

// Read limits. The figures come from BenchmarkRangeCost (package reader;
// bench/requests.txt): on this project's machines a ranged GET from MinIO
// costs about 0.17 ms of the reader's CPU and 1.1 ms of MinIO's whatever
// its length, and each MiB of it 0.24 ms more of the reader's and 0.59 ms
// of MinIO's. Reading unwanted bytes instead of making another request
// pays while they are fewer than about 1.5 MiB, reader and MinIO together
// (1.3-1.6 MiB over the runs made while choosing; 0.55-0.7 MiB counting
// the reader alone); at a public object store's prices a GET costs what
// tens of milliseconds of a core do and bytes within a region are free,
// so there the break-even hole is larger still.
const (
	// HoleLimit is the largest hole between two wanted segments that one
	// ranged GET still spans (Arrow's hole_size_limit; its default of 8 KiB
	// is for a remote store's latency, and CacheOptions::
	// MakeFromNetworkMetrics derives it from latency and bandwidth as this
	// one is from CPU): 1.5 MiB, the measured break-even of reader and
	// MinIO together, so that a hole read costs about what the request it
	// saves does, never much more.
	HoleLimit = 3 << 19
	// RangeLimit is the largest range coalescing makes (Arrow's
	// range_size_limit, 32 MiB by default): 16 MiB, the largest buffer the
	// reader's segment pool recycles, where a request's fixed cost is
	// about a tenth of its bytes'. A segment larger than it is still read
	// whole, in one request of its own.
	RangeLimit = 16 << 20
	// TailRead is the speculative tail read of an object whose footer is
	// not cached: its last 1.5 MiB, the hole limit, since the bytes before
	// the footer are read on the same terms as a hole. It holds every
	// object of up to that size whole (a raw block of the fleet's 10,000
	// rows, a memo object of tens of thousands), and otherwise the footer
	// with the last columns.
	TailRead = HoleLimit
)

// ReadLimits are the limits of a planned read; zero fields take the
// defaults above.
type ReadLimits struct {
	Hole, Range, Tail int64
}

// EnsureDefaults fills zero fields.
func (l ReadLimits) EnsureDefaults() ReadLimits {
	if l.Hole <= 0 {
		l.Hole = HoleLimit
	}
	if l.Range <= 0 {
		l.Range = RangeLimit
	}
	if l.Tail <= 0 {
		l.Tail = TailRead
	}
	return l
}

// RequestKind says what a request of a planned read was for.
type RequestKind uint8

const (
	// RequestTail is the speculative tail read of an object whose footer
	// was not cached: the footer and whatever segments precede it in the
	// bytes read.
	RequestTail RequestKind = iota
	// RequestFooter reads a footer that did not fit in the tail read.
	RequestFooter
	// RequestRange reads a coalesced range of wanted segments.
	RequestRange
)

func (k RequestKind) String() string {
	switch k {
	case RequestTail:
		return "tail"
	case RequestFooter:
		return "footer"
	}
	return "range"
}

// FooterCache keeps the footers of the block objects read last, keyed by
// object key, at most a number of them, least recently used out first. A
// footer is a few KiB parsed (a directory entry per column). The zero
// FooterCache and a nil one cache nothing. Safe for concurrent use; the
// Metas it returns are shared and must not be modified.
type FooterCache struct {
	max   int
	mu    sync.Mutex
	lru   list.List // of footerEntry, most recent first
	index map[string]*list.Element

	hits, misses, stale atomic.Int64
}

// NewFooterCache returns a cache of at most entries footers (none when
// entries <= 0).
func NewFooterCache(entries int) *FooterCache {
	return &FooterCache{max: entries, index: map[string]*list.Element{}}
}

// FooterCacheStats count a FooterCache's lookups: hits, misses, and hits
// whose read failed and was made again uncached (Stale).
type FooterCacheStats struct {
	Hits, Misses, Stale int64
	Entries             int
}

// Stats returns the counters.
func (c *FooterCache) Stats() FooterCacheStats {
	if c == nil {
		return FooterCacheStats{}
	}
	c.mu.Lock()
	n := c.lru.Len()
	c.mu.Unlock()
	return FooterCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stale: c.stale.Load(), Entries: n}
}

// footerEntry is a cached footer: the Meta parsed from it and the
// footer's CRC-32C from the object's trailer, which a read checks the
// footer's bytes against when it reads them back.
type footerEntry struct {
	meta Meta
	crc  uint32
}

func (c *FooterCache) get(key string) (footerEntry, bool) {
	if c == nil || c.max <= 0 {
		return footerEntry{}, false
	}
	c.mu.Lock()
	e, ok := c.index[key]
	if ok {
		c.lru.MoveToFront(e)
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return footerEntry{}, false
	}
	c.hits.Add(1)
	return e.Value.(footerEntry), true
}

func (c *FooterCache) put(fe footerEntry) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[fe.meta.Key]; ok {
		e.Value = fe
		c.lru.MoveToFront(e)
		return
	}
	c.index[fe.meta.Key] = c.lru.PushFront(fe)
	for c.lru.Len() > c.max {
		last := c.lru.Back()
		delete(c.index, last.Value.(footerEntry).meta.Key)
		c.lru.Remove(last)
	}
}

// drop forgets key's footer: a read that started from it failed.
func (c *FooterCache) drop(key string) {
	if c == nil || c.max <= 0 {
		return
	}
	c.stale.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		delete(c.index, key)
		c.lru.Remove(e)
	}
}

// ObjectReader reads columns of block objects with planned requests (the
// file's comment). Its zero fields take defaults: no footer cache, the
// package's limits.
type ObjectReader struct {
	Store   objstore.Reader
	Footers *FooterCache
	Limits  ReadLimits
}

// ObjectRead is one read of some columns of one object.
type ObjectRead struct {
	Key string
	// Want is called with the object's footer before any of its segments
	// is used: it checks the footer for the caller (an error fails the
	// read) and names the columns to fetch (a name given twice is fetched
	// once). cached says the footer came from the cache: a caller that
	// takes part of what a footer says and refuses the rest (one input of
	// a packed object whose entry is wrong) refuses the whole of a cached
	// one instead, since it may be stale, so that the object is read again.
	// Want is called a second time, with the footer read again, when the
	// read from a cached footer failed.
	Want func(meta Meta, cached bool) ([]string, error)
	// From, when positive, is where the wanted bytes start, if the caller
	// knows it: without a cached footer the object is then read from
	// there to its end in one request, rather than its last TailRead
	// bytes (a memo object of one column: its value segment follows an
	// event_id segment that is the raw block's, and only the footer
	// follows it). A wrong guess costs bytes or a request, never
	// correctness.
	From int64
	// Alloc supplies the buffers fetched into (make when nil), as for
	// FetchSegmentsInto: the segments returned are slices of them.
	Alloc Alloc
	// Count, when set, is called for every request made, with its kind
	// and the bytes it asked for (a tail read: the bytes it got).
	Count func(kind RequestKind, bytes int64)
}

// ObjectData is what a read returns: the footer, and the segments of the
// columns Want named, in its order, each checked against its CRC-32C.
type ObjectData struct {
	Meta  Meta
	Names []string
	Segs  [][]byte
	// Cached: the footer came from the cache (and the read with it
	// succeeded).
	Cached bool
}

// Segment returns the segment of column name, if it was read.
func (d *ObjectData) Segment(name string) ([]byte, bool) {
	for i, n := range d.Names {
		if n == name {
			return d.Segs[i], true
		}
	}
	return nil, false
}

// Read reads the columns rd.Want names of object rd.Key: with the cached
// footer, the coalesced ranges of their segments; without, the tail read
// and then the ranges the tail did not hold. Errors are those of
// FetchSegmentsInto and ReadFooter, and Want's.
func (r *ObjectReader) Read(ctx context.Context, rd ObjectRead) (ObjectData, error) {
	if rd.Alloc == nil {
		rd.Alloc = func(n int) []byte { return make([]byte, n) }
	}
	if rd.Count == nil {
		rd.Count = func(RequestKind, int64) {}
	}
	if fe, ok := r.Footers.get(rd.Key); ok {
		d, err := r.readKnown(ctx, rd, fe)
		if err == nil {
			d.Cached = true
			return d, nil
		}
		if ctx.Err() != nil {
			return ObjectData{}, err
		}
		// The footer may be stale (the file's comment): read the object
		// as if it had never been seen, and report only that read. An
		// object that is gone is gone whatever its footer said.
		r.Footers.drop(rd.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			return ObjectData{}, err
		}
	}
	return r.readTail(ctx, rd)
}

// readKnown reads rd's columns of the object whose cached footer is fe.
func (r *ObjectReader) readKnown(ctx context.Context, rd ObjectRead, fe footerEntry) (ObjectData, error) {
	meta := fe.meta
	names, err := wanted(rd, meta, true)
	if err != nil {
		return ObjectData{}, err
	}
	segs := make([][]byte, len(names))
	if err := r.fetch(ctx, rd, meta, names, segs, &fe); err != nil {
		return ObjectData{}, err
	}
	return ObjectData{Meta: meta, Names: names, Segs: segs}, nil
}

// errFooterChanged: the footer read back with a cached footer's segments
// is not the cached one.
var errFooterChanged = fmt.Errorf("footer differs from the one cached: %w", ErrCorrupt)

// checkFooter checks that b, the bytes of an object from fe's footer
// offset to its end, are fe's footer and trailer.
func checkFooter(fe *footerEntry, b []byte) error {
	m := &fe.meta
	if int64(len(b)) != m.FooterLength+TrailerSize {
		return errFooterChanged
	}
	flen, fcrc, err := parseTrailer(m.Key, b[len(b)-TrailerSize:])
	if err != nil || flen != m.FooterLength || fcrc != fe.crc || crc32.Checksum(b[:flen], castagnoli) != fe.crc {
		return errFooterChanged
	}
	return nil
}

// wanted calls rd.Want and returns its names without repeats.
func wanted(rd ObjectRead, meta Meta, cached bool) ([]string, error) {
	names, err := rd.Want(meta, cached)
	if err != nil {
		return nil, err
	}
	out := names[:0:0]
	for _, n := range names {
		dup := false
		for _, o := range out {
			dup = dup || o == n
		}
		if !dup {
			out = append(out, n)
		}
	}
	return out, nil
}

// fetch fetches the segments of names whose segs entry is nil, in
// coalesced ranges (concurrently when there are several), into segs. With
// a cached footer fe, the last range is extended to the object's end when
// the footer is within the hole limit of it, and the footer read back is
// checked against fe (the file's comment).
func (r *ObjectReader) fetch(ctx context.Context, rd ObjectRead, meta Meta, names []string, segs [][]byte, fe *footerEntry) error {
	var missing []string
	var at []int
	for i, n := range names {
		if segs[i] == nil {
			missing = append(missing, n)
			at = append(at, i)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	lim := r.Limits.EnsureDefaults()
	spans, err := PlanSpans(meta, missing, lim)
	if err != nil {
		return err
	}
	var verify func([]byte) error
	if last := &spans[len(spans)-1]; fe != nil && meta.FooterOffset > 0 && meta.Size > meta.FooterOffset &&
		meta.FooterOffset-last.End <= lim.Hole && meta.Size-last.Off <= max(lim.Range, last.End-last.Off) {
		last.End, last.footer = meta.Size, meta.FooterOffset
		verify = func(b []byte) error { return checkFooter(fe, b) }
	}
	got := make([][]byte, len(missing))
	for _, sp := range spans {
		rd.Count(RequestRange, sp.End-sp.Off)
	}
	if err := fetchSpans(ctx, r.Store, meta, spans, got, rd.Alloc, verify); err != nil {
		return err
	}
	for j, i := range at {
		segs[i] = got[j]
	}
	return nil
}

// readTail reads rd's columns of an object whose footer is not known.
func (r *ObjectReader) readTail(ctx context.Context, rd ObjectRead) (ObjectData, error) {
	lim := r.Limits.EnsureDefaults()
	tr := newTailRead(rd.Alloc)
	defer tr.release()
	var (
		tail []byte
		base int64 // the object offset of tail[0]
		info objstore.Info
		err  error
	)
	marks := false // tr's marks are the running CRC of tail from base
	if rd.From > 0 {
		tail, info, err = r.Store.GetFromInto(ctx, rd.Key, rd.From, MaxTail, tr.allocFn, tr.filled)
		rd.Count(RequestTail, int64(len(tail)))
		base, marks = rd.From, true
		if errors.Is(err, objstore.ErrRange) {
			err = errNoFrom // the object ends before From: a wrong guess
		}
	}
	if rd.From <= 0 || errors.Is(err, errNoFrom) {
		buf := rd.Alloc(int(lim.Tail))
		var n int
		n, info, err = r.Store.GetSuffixInto(ctx, rd.Key, buf)
		rd.Count(RequestTail, int64(n))
		tail, base, marks = buf[:n], info.Size-int64(n), false
	}
	if err != nil {
		return ObjectData{}, err
	}
	if len(tail) < TrailerSize {
		return ObjectData{}, corrupt(rd.Key, "%d bytes from offset %d: shorter than the trailer", len(tail), base)
	}
	flen, fcrc, err := parseTrailer(rd.Key, tail[len(tail)-TrailerSize:])
	if err != nil {
		return ObjectData{}, err
	}
	foff := info.Size - TrailerSize - flen
	if foff < 0 {
		return ObjectData{}, corrupt(rd.Key, "footer length %d exceeds object size %d", flen, info.Size)
	}
	var footer []byte
	if foff >= base {
		footer = tail[foff-base : foff-base+flen]
	} else {
		// A footer larger than the tail read: read it (more of the tail
		// would hold it, but the tail is sized for ordinary footers).
		footer = make([]byte, flen)
		rd.Count(RequestFooter, flen)
		if err := r.Store.GetRangeInto(ctx, rd.Key, foff, footer, nil); err != nil {
			return ObjectData{}, err
		}
	}
	meta, err := parseFooter(rd.Key, footer, fcrc, info.Size, foff)
	if err != nil {
		return ObjectData{}, err
	}
	meta.Checksum = info.Checksum
	r.Footers.put(footerEntry{meta: meta, crc: fcrc})
	names, err := wanted(rd, meta, false)
	if err != nil {
		return ObjectData{}, err
	}
	// Segments wholly within the tail are taken from it, checked as they
	// would be fetched; the rest are fetched.
	if _, err := PlanSpans(meta, names, lim); err != nil {
		return ObjectData{}, err // a name the object lacks, a segment out of place
	}
	segs := make([][]byte, len(names))
	for i, n := range names {
		c, _ := meta.Column(n)
		if c.Offset < base || c.Offset+c.Length > foff {
			continue
		}
		lo := c.Offset - base
		seg := tail[lo : lo+c.Length : lo+c.Length]
		if crc := tr.crcOf(seg, lo, marks); crc != c.CRC32C {
			return ObjectData{}, fmt.Errorf("block %s: column %s: checksum mismatch: %w", rd.Key, c.Name, ErrCorrupt)
		}
		segs[i] = seg
	}
	if err := r.fetch(ctx, rd, meta, names, segs, nil); err != nil {
		return ObjectData{}, err
	}
	return ObjectData{Meta: meta, Names: names, Segs: segs}, nil
}

// errNoFrom: the object is shorter than ObjectRead.From.
var errNoFrom = errors.New("object ends before the offset given")

// crcOf is the CRC-32C of seg, at offset lo of the tail: from the running
// CRC kept as the bytes arrived when seg starts the tail and marks are
// kept (FetchTail's way: the CRC at the last chunk boundary within seg,
// extended to its end), else computed over seg.
func (r *tailRead) crcOf(seg []byte, lo int64, marks bool) uint32 {
	if !marks || lo != 0 {
		return crc32.Checksum(seg, castagnoli)
	}
	n := len(seg)
	crc, at := uint32(0), 0
	for _, mk := range r.marks {
		if mk.hi > n {
			break
		}
		crc, at = mk.crc, mk.hi
	}
	return crc32.Update(crc, castagnoli, seg[at:n])
}

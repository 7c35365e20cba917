package block

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/warehouse/objstore"
)

// SegmentCache keeps the column segments of block objects a process read
// last, up to a budget of bytes, least recently used out first.
//
// Why: SIG memoizes one task per (component, block) (paper IV.A), and the
// components of a fleet read overlapping raw columns: the Ads fleet's 13
// components read 20.4 MB of one 50,000-row block's columns between them,
// 5.2 MB of them distinct (event_id, which every task copies into its memo
// object, and the query and title every text feature starts from). A
// worker that runs the tasks of a block close together fetches each column
// once instead of once per component: a quarter of the GETs' bytes, for the
// object store as for the worker.
//
// An entry is keyed by the object and the column's directory entry (offset,
// length and CRC-32C), so an object rewritten with other bytes is never
// served from an old entry. Segments are immutable once cached: the arrays
// decoded from them alias their bytes (DecodeSegment), and nothing writes
// to an Arrow buffer after it is built.
//
// A segment is fetched by one reader at a time: the in-process workers
// lease a block's tasks together, so several of them miss its columns at
// once, and the others wait for the first one's fetch instead of repeating
// it (if that fetch fails, for instance because its task was cancelled,
// each fetches for itself).
//
// The zero SegmentCache, and a nil one, cache nothing.
type SegmentCache struct {
	max int64

	mu       sync.Mutex
	size     int64
	lru      list.List // of *segEntry, most recent first
	index    map[segKey]*list.Element
	inflight map[segKey]*segFlight
	stats    SegmentCacheStats
}

// segFlight is a fetch of one segment under way. seg is set, or left nil
// if the fetch failed, before done is closed.
type segFlight struct {
	done    chan struct{}
	seg     []byte
	waiters int // readers waiting for it (tests)
}

type segKey struct {
	object, name   string
	offset, length int64
	crc            uint32
}

type segEntry struct {
	key segKey
	seg []byte
}

// SegmentCacheStats counts a cache's lookups by outcome, in segments and
// bytes. A lookup that waited for another reader's fetch is a hit.
type SegmentCacheStats struct {
	Hits, Misses           int64
	HitBytes, MissBytes    int64
	Entries, ResidentBytes int64
}

// NewSegmentCache returns a cache of at most maxBytes of segments; a
// segment larger than that is never kept. maxBytes <= 0 caches nothing.
func NewSegmentCache(maxBytes int64) *SegmentCache {
	return &SegmentCache{max: maxBytes, index: map[segKey]*list.Element{}, inflight: map[segKey]*segFlight{}}
}

// Stats returns the lookups so far and what the cache holds now.
func (c *SegmentCache) Stats() SegmentCacheStats {
	if c == nil {
		return SegmentCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.ResidentBytes = int64(len(c.index)), c.size
	return s
}

func keyOf(object string, col Column) segKey {
	return segKey{object: object, name: col.Name, offset: col.Offset, length: col.Length, crc: col.CRC32C}
}

// lookup returns k's segment if it is cached; else the fetch of it under
// way, to wait for; else it registers a fetch that the caller owns and
// must end with land.
func (c *SegmentCache) lookup(k segKey) (seg []byte, wait *segFlight, own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[k]; ok {
		c.stats.Hits++
		c.stats.HitBytes += k.length
		c.lru.MoveToFront(e)
		return e.Value.(*segEntry).seg, nil, false
	}
	if f, ok := c.inflight[k]; ok {
		c.stats.Hits++
		c.stats.HitBytes += k.length
		f.waiters++
		return nil, f, false
	}
	c.stats.Misses++
	c.stats.MissBytes += k.length
	c.inflight[k] = &segFlight{done: make(chan struct{})}
	return nil, nil, true
}

// land ends the caller's fetch of k: seg (nil if the fetch failed) is
// cached and handed to the readers waiting for it.
func (c *SegmentCache) land(k segKey, seg []byte) {
	c.mu.Lock()
	f := c.inflight[k]
	delete(c.inflight, k)
	c.mu.Unlock()
	if seg != nil {
		c.put(k, seg)
	}
	f.seg = seg
	close(f.done)
}

func (c *SegmentCache) put(k segKey, seg []byte) {
	if c == nil || c.max <= 0 || int64(len(seg)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.index[k]; ok {
		return // fetched twice by concurrent readers: the first stays
	}
	c.index[k] = c.lru.PushFront(&segEntry{key: k, seg: seg})
	c.size += int64(len(seg))
	for c.size > c.max {
		old := c.lru.Remove(c.lru.Back()).(*segEntry)
		delete(c.index, old.key)
		c.size -= int64(len(old.seg))
	}
}

// ReadColumnsCached is ReadColumns serving the segments it can from cache
// and fetching only the others (in one FetchSegments call, so neighbours
// still share a GET), which it then caches. Every segment, cached or
// fetched, was checked against its CRC-32C when it was fetched. A nil cache
// makes it ReadColumns.
func ReadColumnsCached(ctx context.Context, store objstore.Reader, meta Meta, cols []string, cache *SegmentCache) (arrow.Record, error) {
	if cache == nil || cache.max <= 0 {
		return ReadColumns(ctx, store, meta, cols)
	}
	meta, names, err := columnsToRead(ctx, store, meta, cols)
	if err != nil {
		return nil, err
	}
	segs := make([][]byte, len(names))
	var owned, waited []int // indexes in names
	waits := map[int]*segFlight{}
	// Every column is resolved before any lookup: a lookup that misses
	// registers a fetch this call must land, and returning in between
	// would leave other readers waiting on it.
	keys := make([]segKey, len(names))
	for i, n := range names {
		col, ok := meta.Column(n)
		if !ok {
			return nil, fmt.Errorf("block %s: column %q: %w", meta.Key, n, ErrNoColumn)
		}
		keys[i] = keyOf(meta.Key, col)
	}
	for i, k := range keys {
		seg, f, own := cache.lookup(k)
		switch {
		case own:
			owned = append(owned, i)
		case f != nil:
			waited = append(waited, i)
			waits[i] = f
		default:
			segs[i] = seg
		}
	}
	if err := fetchInto(ctx, store, meta, names, keys, owned, segs, cache); err != nil {
		return nil, err
	}
	var again []int // another reader's fetch failed: fetch for ourselves
	for _, i := range waited {
		select {
		case <-waits[i].done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if segs[i] = waits[i].seg; segs[i] == nil {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		got, err := FetchSegments(ctx, store, meta, pick(names, again))
		if err != nil {
			return nil, err
		}
		for j, i := range again {
			segs[i] = got[j]
		}
	}
	return assemble(meta.Key, meta, names, segs)
}

// fetchInto fetches the segments of names[owned], whose fetches the caller
// registered with cache.lookup under keys[i], into segs, and lands them in the cache
// (all of them, as failed, if the fetch fails).
func fetchInto(ctx context.Context, store objstore.Reader, meta Meta, names []string, keys []segKey, owned []int, segs [][]byte, cache *SegmentCache) error {
	if len(owned) == 0 {
		return nil
	}
	got, err := FetchSegments(ctx, store, meta, pick(names, owned))
	for j, i := range owned {
		var seg []byte
		if err == nil {
			// A fetched segment is a slice of its GET's buffer, which may
			// hold neighbouring segments: cached as it is, it would keep
			// them all in memory, uncounted, until it left the cache
			// itself (event_id, which every task reads, would pin a whole
			// block). So when one call fetched several, each is cached as
			// a copy of its own bytes.
			seg = got[j]
			if len(got) > 1 {
				seg = bytes.Clone(seg)
			}
			segs[i] = seg
		}
		cache.land(keys[i], seg)
	}
	return err
}

// pick returns names[idx...].
func pick(names []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = names[i]
	}
	return out
}

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
// to an Arrow buffer after it is built. The zero SegmentCache, and a nil
// one, cache nothing.
type SegmentCache struct {
	max int64

	mu    sync.Mutex
	size  int64
	lru   list.List // of *segEntry, most recent first
	index map[segKey]*list.Element
	stats SegmentCacheStats
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
// bytes.
type SegmentCacheStats struct {
	Hits, Misses           int64
	HitBytes, MissBytes    int64
	Entries, ResidentBytes int64
}

// NewSegmentCache returns a cache of at most maxBytes of segments; a
// segment larger than that is never kept. maxBytes <= 0 caches nothing.
func NewSegmentCache(maxBytes int64) *SegmentCache {
	return &SegmentCache{max: maxBytes, index: map[segKey]*list.Element{}}
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

func (c *SegmentCache) get(k segKey) []byte {
	if c == nil || c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.index[k]
	if !ok {
		c.stats.Misses++
		c.stats.MissBytes += k.length
		return nil
	}
	c.stats.Hits++
	c.stats.HitBytes += k.length
	c.lru.MoveToFront(e)
	return e.Value.(*segEntry).seg
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
func ReadColumnsCached(ctx context.Context, store *objstore.Store, meta Meta, cols []string, cache *SegmentCache) (arrow.Record, error) {
	if cache == nil {
		return ReadColumns(ctx, store, meta, cols)
	}
	meta, names, err := columnsToRead(ctx, store, meta, cols)
	if err != nil {
		return nil, err
	}
	segs := make([][]byte, len(names))
	var missing []string
	var at []int
	for i, n := range names {
		col, ok := meta.Column(n)
		if !ok {
			return nil, fmt.Errorf("block %s: column %q: %w", meta.Key, n, ErrNoColumn)
		}
		if segs[i] = cache.get(keyOf(meta.Key, col)); segs[i] == nil {
			missing = append(missing, n)
			at = append(at, i)
		}
	}
	if len(missing) > 0 {
		got, err := FetchSegments(ctx, store, meta, missing)
		if err != nil {
			return nil, err
		}
		// A fetched segment is a slice of its GET's buffer, which may hold
		// neighbouring segments: cached as it is, it would keep them all in
		// memory, uncounted, until it left the cache itself (event_id,
		// which every task reads, would pin a whole block). So when one
		// call fetched several, each is cached as a copy of its own bytes.
		for j, i := range at {
			col, _ := meta.Column(names[i])
			seg := got[j]
			if len(got) > 1 {
				seg = bytes.Clone(seg)
			}
			cache.put(keyOf(meta.Key, col), seg)
			segs[i] = seg
		}
	}
	return assemble(meta.Key, meta, names, segs)
}

package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/sigdata/sig/internal/pebbleutil"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
)

// FormatVersion is the on-disk format this package reads and writes.
const FormatVersion = "1"

// Sentinel errors.
var (
	ErrNotFound = errors.New("catalog: block not found")
	// ErrOverlap: a block's Kafka range overlaps a different catalogued
	// block of the same partition and window.
	ErrOverlap = errors.New("catalog: kafka range overlaps a catalogued block")
	// ErrConflict: a block disagrees with its source's recorded settings
	// (window length).
	ErrConflict = errors.New("catalog: block conflicts with its source")
	// ErrFormat: the directory holds a catalog of another format version.
	ErrFormat = errors.New("catalog: unknown format version")
)

var (
	keyFormat     = []byte("sig.catalog.format")
	keyGeneration = []byte("sig.catalog.generation")
	keySeq        = []byte("sig.catalog.seq")
)

// historyPrefix is the prefix of the superseded versions of one block,
// which sort by version under it.
func historyPrefix(source, id string) []byte { return []byte("h\x00" + source + "\x00" + id + "\x00") }

func historyKey(source, id string, v int64) []byte {
	return binary.BigEndian.AppendUint64(historyPrefix(source, id), uint64(v))
}

func pinKey(name string) []byte { return []byte("p\x00" + name) }

func sourceKey(source string) []byte { return []byte("s\x00" + source) }

func blockPrefix(source string) []byte { return []byte("b\x00" + source + "\x00") }

func blockKey(source, id string) []byte { return append(blockPrefix(source), id...) }

func partitionPrefix(topic string, partition int32) []byte {
	k := []byte("o\x00" + topic + "\x00")
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

// offsetKey orders a partition's entries by window, then first offset.
func offsetKey(topic string, partition int32, window, first int64) []byte {
	k := partitionPrefix(topic, partition)
	k = binary.BigEndian.AppendUint64(k, uint64(window)^(1<<63)) // signed order
	return binary.BigEndian.AppendUint64(k, uint64(first))
}

// offsetEntry is the value of an o\x00 index key.
type offsetEntry struct {
	Source       string `json:"source"`
	ID           string `json:"id"`
	Last         int64  `json:"last"`
	MaxEventTime int64  `json:"max_event_time"`
}

// SourceInfo is what the catalog records about a source.
type SourceInfo struct {
	Source       string `json:"source"`
	WindowLength int64  `json:"window_length"`
}

// Coverage is one catalogued block's share of a Kafka partition: every record
// of window Window with an offset in [First, Last] is in block ID.
type Coverage struct {
	Window      int64
	First, Last int64
	ID          string
	// MaxEventTime is the block's latest event time.
	MaxEventTime int64
}

// Catalog is an open block catalog.
type Catalog struct {
	db *pebble.DB
	mu sync.Mutex // serializes read-check-write in Add

	// decoded caches block entries by their stored bytes: every submit
	// lists the blocks of its range, and decoding their JSON each time was
	// a large part of a submit's CPU. Keyed by the value itself, an entry
	// can never be stale; callers get copies, so none can change another's.
	decodedMu    sync.Mutex
	decoded      map[string]block.Meta
	decodedBytes int // sum of the cached entries' stored sizes
	decodeBudget int // bound on decodedBytes; maxDecodedBytes but in tests
}

// maxDecodedBytes bounds the decode cache by the stored size of its entries
// (a raw block's is about 1.5 KiB; the decoded copy takes about as much
// again), so about twice this in memory at most, whatever the blocks'
// column counts. Past it the cache starts over.
const maxDecodedBytes = 32 << 20

// decode returns the block entry stored as v.
func (c *Catalog) decode(v []byte) (block.Meta, error) {
	c.decodedMu.Lock()
	m, ok := c.decoded[string(v)]
	c.decodedMu.Unlock()
	if !ok {
		if err := json.Unmarshal(v, &m); err != nil {
			return block.Meta{}, err
		}
		c.decodedMu.Lock()
		if len(v) <= c.decodeBudget { // one larger than the whole budget is not kept
			if c.decoded == nil || c.decodedBytes+len(v) > c.decodeBudget {
				c.decoded = make(map[string]block.Meta)
				c.decodedBytes = 0
			}
			if _, dup := c.decoded[string(v)]; !dup {
				c.decoded[string(v)] = m
				c.decodedBytes += len(v)
			}
		}
		c.decodedMu.Unlock()
	}
	return m.Clone(), nil
}

// Open opens (creating if needed) the catalog in dir.
func Open(dir string) (*Catalog, error) {
	db, err := pebbleutil.Open(dir, pebbleutil.DurabilityMachine, nil)
	if err != nil {
		return nil, fmt.Errorf("catalog: open %s: %w", dir, err)
	}
	c := &Catalog{db: db, decodeBudget: maxDecodedBytes}
	v, closer, err := db.Get(keyFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := db.Set(keyFormat, []byte(FormatVersion), pebble.Sync); err != nil {
			db.Close()
			return nil, fmt.Errorf("catalog: %w", err)
		}
	case err != nil:
		db.Close()
		return nil, fmt.Errorf("catalog: %w", err)
	default:
		ok := string(v) == FormatVersion
		got := string(v)
		closer.Close()
		if !ok {
			db.Close()
			return nil, fmt.Errorf("catalog %s: format %q, want %q: %w", dir, got, FormatVersion, ErrFormat)
		}
	}
	if _, closer, err := db.Get(keySeq); errors.Is(err, pebble.ErrNotFound) {
		// A new catalog, or one written before versions: its blocks have
		// Seq 0, and snapshot 1 (the first Snapshot can return) sees them.
		if err := db.Set(keySeq, binary.BigEndian.AppendUint64(nil, 1), pebble.Sync); err != nil {
			db.Close()
			return nil, fmt.Errorf("catalog: %w", err)
		}
	} else if err != nil {
		db.Close()
		return nil, fmt.Errorf("catalog: %w", err)
	} else {
		closer.Close()
	}
	if err := c.indexBySeq(); err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the catalog.
func (c *Catalog) Close() error { return c.db.Close() }

// PebbleMetrics returns the store's Pebble figures, for
// pebbleutil.Collector.
func (c *Catalog) PebbleMetrics() *pebble.Metrics { return c.db.Metrics() }

// Add records a raw block, or a new version of a catalogued one, durably:
// Commit of m alone.
func (c *Catalog) Add(m block.Meta) error { return c.Commit([]block.Meta{m}) }

// Commit records raw blocks and new versions of catalogued blocks in one
// durable Pebble batch, with the Kafka coverage each brings: a version 1
// block covers its Kafka range, a version N>=2 the span of its last Change
// (the change buffer that made it). Each gets the next catalog sequence
// number (Meta.Seq), in order. Ingestion commits every block a change buffer
// made at once, so a snapshot sees all of them or none.
//
// Adding a version 1 block with an id already catalogued at version 1
// replaces it (re-sealing after a crash writes the same block again). A
// version N>=2 must follow the catalogued version N-1 (ErrConflict
// otherwise); the version it supersedes stays readable (GetAt, RangeAt,
// Versions) until GC. A block or change whose Kafka range overlaps another
// of the same partition and window is refused with ErrOverlap.
func (c *Catalog) Commit(ms []block.Meta) error { return c.commit(ms, false) }

// commit is Commit; rebuilding, a version may follow an older catalogued
// version than N-1, or be a block's first (GC deleted the objects of the
// versions between), and then covers every change since: Changes are
// cumulative, so the version holds their records. A span exactly equal to
// one already covered is then one buffer's, which made versions of several
// blocks (or a block and versions), and is not an overlap.
func (c *Catalog) commit(ms []block.Meta, rebuild bool) error {
	for _, m := range ms {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		if m.IsMemo() {
			return fmt.Errorf("catalog: block %s is a memoized block; the catalog holds raw blocks", m.ID)
		}
		if m.WindowLength <= 0 || m.Key == "" {
			return fmt.Errorf("catalog: block %s: window length and key are required", m.ID)
		}
		if m.Ref().Version() >= 2 {
			if n := len(m.Changes); n == 0 || m.Changes[n-1].Version != m.Ref().Version() {
				return fmt.Errorf("catalog: block %s version %d: its last change must be the one that made it", m.ID, m.Ref().Version())
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.NewBatch()
	defer b.Close()
	seq, err := c.seq()
	if err != nil {
		return err
	}
	sources := map[string]int64{}
	batchIDs := map[string]int64{}  // source\x00id -> version added in this batch
	batchSeqs := map[string]int64{} // source\x00id -> its sequence number
	for _, m := range ms {
		wl, seen := sources[m.Source]
		if !seen {
			info, err := c.Source(m.Source)
			switch {
			case errors.Is(err, ErrNotFound):
				v, _ := json.Marshal(SourceInfo{Source: m.Source, WindowLength: m.WindowLength})
				b.Set(sourceKey(m.Source), v, nil)
				wl = m.WindowLength
			case err != nil:
				return err
			default:
				wl = info.WindowLength
			}
			sources[m.Source] = wl
		}
		if wl != m.WindowLength {
			return fmt.Errorf("catalog: block %s has window length %d, source %s uses %d: %w",
				m.ID, m.WindowLength, m.Source, wl, ErrConflict)
		}
		// The version catalogued before m: in the store, or added
		// earlier in this batch.
		bid := m.Source + "\x00" + m.ID
		old, err := c.Get(m.Source, m.ID)
		var oldV, oldSeq int64
		switch {
		case err == nil:
			oldV, oldSeq = old.Ref().Version(), old.Seq
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if v, ok := batchIDs[bid]; ok {
			oldV, oldSeq = v, batchSeqs[bid]
		}
		var spans []block.KafkaRange
		switch {
		case m.Ref().Version() == 1:
			if oldV > 1 {
				return fmt.Errorf("catalog: block %s is at version %d; version 1 cannot replace it: %w", m.ID, oldV, ErrConflict)
			}
			if oldV == 1 {
				for _, sp := range baseSpans(old) {
					b.Delete(offsetKey(sp.Topic, sp.Partition, old.WindowStart, sp.First), nil)
				}
			}
			spans = append(spans, baseSpans(m)...)
		default:
			if oldV != m.Ref().Version()-1 && !(rebuild && oldV < m.Ref().Version()) {
				return fmt.Errorf("catalog: version %d of block %s/%s follows version %d, the catalog has %s: %w",
					m.Ref().Version(), m.Source, m.ID, m.Ref().Version()-1, versionName(oldV), ErrConflict)
			}
			if _, ok := batchIDs[bid]; ok {
				return fmt.Errorf("catalog: block %s: two versions in one commit", m.ID)
			}
			if oldV > 0 {
				hv, _ := json.Marshal(old)
				b.Set(historyKey(m.Source, m.ID, oldV), hv, nil)
			} else {
				spans = append(spans, baseSpans(m)...)
			}
			for _, ch := range m.Changes {
				if ch.Version > oldV {
					spans = append(spans, block.KafkaRange{Topic: ch.Topic, Partition: ch.Partition, First: ch.First, Last: ch.Last})
				}
			}
		}
		for _, span := range spans {
			if other, ok, err := c.overlapping(m.ID, m.WindowStart, span, m.Ref().Version() == 1); err != nil {
				return err
			} else if ok && rebuild && other.First == span.First && other.Last == span.Last {
				// One buffer's span: it made a block and versions of
				// others, or a compacted block holds a part's change
				// span another block shares. Two version-1 blocks of a
				// window never share a span (it is their id).
				continue
			} else if ok {
				return fmt.Errorf("catalog: block %s version %d covers %s[%d] offsets %d-%d, block %s already covers %d-%d: %w",
					m.ID, m.Ref().Version(), span.Topic, span.Partition, span.First, span.Last, other.ID, other.First, other.Last, ErrOverlap)
			}
			v, _ := json.Marshal(offsetEntry{Source: m.Source, ID: m.ID, Last: span.Last, MaxEventTime: m.MaxEventTime})
			b.Set(offsetKey(span.Topic, span.Partition, m.WindowStart, span.First), v, nil)
		}
		seq++
		m.Seq = seq
		v, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		b.Set(blockKey(m.Source, m.ID), v, nil)
		// The change feed holds each block's newest version only
		// (feed.go).
		if oldSeq >= 1 {
			b.Delete(seqKey(oldSeq), nil)
		}
		b.Set(seqKey(seq), seqRef(m.Source, m.ID), nil)
		batchIDs[bid], batchSeqs[bid] = m.Ref().Version(), seq
	}
	b.Set(keySeq, binary.BigEndian.AppendUint64(nil, uint64(seq)), nil)
	b.Set(keyIndexed, binary.BigEndian.AppendUint64(nil, uint64(seq)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("catalog: commit %d blocks: %w", len(ms), err)
	}
	return nil
}

// baseSpans are the Kafka records a block held at version 1: its range, or
// a compacted block's parts' spans (block.Meta.Spans without the changes).
func baseSpans(m block.Meta) []block.KafkaRange {
	if len(m.Parts) > 0 {
		var out []block.KafkaRange
		for _, p := range m.Parts {
			out = append(out, p.Spans...)
		}
		return out
	}
	if m.Kafka != nil {
		return []block.KafkaRange{*m.Kafka}
	}
	return nil
}

func versionName(v int64) string {
	if v == 0 {
		return "no such block"
	}
	return fmt.Sprintf("version %d", v)
}

// seq is the last sequence number handed out.
func (c *Catalog) seq() (int64, error) {
	v, closer, err := c.db.Get(keySeq)
	if errors.Is(err, pebble.ErrNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("catalog: sequence value of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Snapshot returns the current catalog sequence number: a consistent view
// that RangeAt and GetAt read as it is now, whatever is committed later
// (until GC removes versions no pin holds). Snapshots are >= 1; 0 means
// "now" wherever a snapshot is taken.
func (c *Catalog) Snapshot() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq()
}

// overlapping finds catalogued coverage of window's records in kr's
// partition that overlaps kr, other than block id's own version-1 range when
// replacing is set. Ranges of one partition and window are disjoint, so only
// the last one starting at or before kr's last offset can overlap.
func (c *Catalog) overlapping(id string, window int64, kr block.KafkaRange, replacing bool) (Coverage, bool, error) {
	lower := offsetKey(kr.Topic, kr.Partition, window, 0)
	upper := offsetKey(kr.Topic, kr.Partition, window, kr.Last+1)
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return Coverage{}, false, err
	}
	defer it.Close()
	for ok := it.Last(); ok; ok = it.Prev() {
		var e offsetEntry
		if err := json.Unmarshal(it.Value(), &e); err != nil {
			return Coverage{}, false, fmt.Errorf("catalog: offset index: %w", err)
		}
		first := int64(binary.BigEndian.Uint64(it.Key()[len(it.Key())-8:]))
		if replacing && e.ID == id && first == kr.First {
			continue
		}
		if e.Last >= kr.First {
			return Coverage{Window: window, First: first, Last: e.Last, ID: e.ID, MaxEventTime: e.MaxEventTime}, true, nil
		}
		return Coverage{}, false, nil
	}
	return Coverage{}, false, nil
}

// Remove deletes a block's entries, every version's, and the Kafka coverage
// they held (not the objects).
func (c *Catalog) Remove(source, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.Get(source, id)
	if err != nil {
		return err
	}
	b := c.db.NewBatch()
	defer b.Close()
	for _, sp := range m.Spans() {
		b.Delete(offsetKey(sp.Topic, sp.Partition, m.WindowStart, sp.First), nil)
	}
	p := historyPrefix(source, id)
	b.DeleteRange(p, append(slices.Clone(p[:len(p)-1]), 1), nil)
	b.Delete(blockKey(source, id), nil)
	if m.Seq >= 1 {
		b.Delete(seqKey(m.Seq), nil)
	}
	return b.Commit(pebble.Sync)
}

// Get returns one block's metadata, at its newest version.
func (c *Catalog) Get(source, id string) (block.Meta, error) {
	v, closer, err := c.db.Get(blockKey(source, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return block.Meta{}, fmt.Errorf("block %s/%s: %w", source, id, ErrNotFound)
	}
	if err != nil {
		return block.Meta{}, fmt.Errorf("catalog: %w", err)
	}
	defer closer.Close()
	m, err := c.decode(v)
	if err != nil {
		return block.Meta{}, fmt.Errorf("catalog: block %s/%s: %w", source, id, err)
	}
	return m, nil
}

// Source returns what the catalog records about a source.
func (c *Catalog) Source(source string) (SourceInfo, error) {
	v, closer, err := c.db.Get(sourceKey(source))
	if errors.Is(err, pebble.ErrNotFound) {
		return SourceInfo{}, fmt.Errorf("source %s: %w", source, ErrNotFound)
	}
	if err != nil {
		return SourceInfo{}, fmt.Errorf("catalog: %w", err)
	}
	defer closer.Close()
	var s SourceInfo
	if err := json.Unmarshal(v, &s); err != nil {
		return SourceInfo{}, fmt.Errorf("catalog: source %s: %w", source, err)
	}
	return s, nil
}

// Sources lists the catalogued sources in name order.
func (c *Catalog) Sources() ([]string, error) {
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte("s\x00"), UpperBound: []byte("s\x01")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Key()[2:]))
	}
	return out, it.Error()
}

// scan visits the blocks of source with ids in [from, to) (to empty: no upper
// bound), in id order, until fn returns false.
func (c *Catalog) scan(source string, from, to string, fn func(block.Meta) bool) error {
	p := blockPrefix(source)
	upper := append(slices.Clone(p[:len(p)-1]), 1) // end of the prefix
	if to != "" {
		upper = append(slices.Clone(p), to...)
	}
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: append(slices.Clone(p), from...), UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		m, err := c.decode(it.Value())
		if err != nil {
			return fmt.Errorf("catalog: block %s: %w", bytes.TrimPrefix(it.Key(), p), err)
		}
		if !fn(m) {
			break
		}
	}
	return it.Error()
}

// Blocks returns every block of source in event order (by id: window, then
// partition, then offset). A block compaction ended (its newest version a
// tombstone) is no longer a block: its rows are in the compacted block.
func (c *Catalog) Blocks(source string) ([]block.Meta, error) {
	var out []block.Meta
	err := c.scan(source, "", "", func(m block.Meta) bool {
		if !m.IsTombstone() {
			out = append(out, m)
		}
		return true
	})
	return out, err
}

// BlocksAfter returns up to limit blocks of source in event order, starting
// after the block with id after ("": from the first); pages of a listing.
func (c *Catalog) BlocksAfter(source, after string, limit int) ([]block.Meta, error) {
	from := ""
	if after != "" {
		from = after + "\x00" // the least id greater than after
	}
	var out []block.Meta
	err := c.scan(source, from, "", func(m block.Meta) bool {
		if !m.IsTombstone() {
			out = append(out, m)
		}
		return len(out) < limit
	})
	return out, err
}

// Range returns the blocks of source holding events with event time in
// [from, to) (microseconds), in event order, each at its newest version:
// RangeAt(source, from, to, 0). Late blocks of a window are included.
func (c *Catalog) Range(source string, from, to int64) ([]block.Meta, error) {
	return c.RangeAt(source, from, to, 0)
}

// RangeAt is Range as of snapshot snap (0: now): each block at its newest
// version with Seq <= snap, blocks catalogued after snap absent.
//
// The range is first clamped to the event times SIG stores
// ([transform.MinEventTime, transform.EndEventTime)): no block holds others,
// window prefixes order blocks only within it, and the window arithmetic
// below cannot overflow on what remains, whatever the caller passes.
func (c *Catalog) RangeAt(source string, from, to, snap int64) ([]block.Meta, error) {
	if snap < 0 {
		return nil, fmt.Errorf("catalog: snapshot %d is negative", snap)
	}
	from, to = max(from, transform.MinEventTime), min(to, transform.EndEventTime)
	if from >= to {
		return nil, nil
	}
	info, err := c.Source(source)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	wl := info.WindowLength
	startWindow := floorDiv(from, wl) * wl
	// The scan stops at the window after the one holding to-1; when that
	// window would start at or past the end of event time, its prefix
	// would have a five-digit year and sort before every other, so the
	// scan runs to the end of the source instead.
	var endID string
	if last := floorDiv(to-1, wl) * wl; wl < transform.EndEventTime-last {
		endID = block.WindowPrefix(last + wl)
	}
	var out []block.Meta
	var herr error
	err = c.scan(source, block.WindowPrefix(startWindow), endID, func(m block.Meta) bool {
		if snap != 0 && m.Seq > snap {
			var ok bool
			if m, ok, herr = c.versionAt(source, m.ID, snap); herr != nil {
				return false
			} else if !ok {
				return true
			}
		}
		if m.Rows > 0 && m.MaxEventTime >= from && m.MinEventTime < to {
			out = append(out, m)
		}
		return true
	})
	if err == nil {
		err = herr
	}
	return out, err
}

// versionAt returns the newest superseded version of a block with Seq <=
// snap (false if none: the block did not exist at snap).
func (c *Catalog) versionAt(source, id string, snap int64) (block.Meta, bool, error) {
	p := historyPrefix(source, id)
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(slices.Clone(p[:len(p)-1]), 1)})
	if err != nil {
		return block.Meta{}, false, err
	}
	defer it.Close()
	for ok := it.Last(); ok; ok = it.Prev() {
		m, err := c.decode(it.Value())
		if err != nil {
			return block.Meta{}, false, fmt.Errorf("catalog: block %s/%s history: %w", source, id, err)
		}
		if m.Seq <= snap {
			return m, true, nil
		}
	}
	return block.Meta{}, false, it.Error()
}

// GetAt returns one block's metadata as of snapshot snap (0: now): its
// newest version with Seq <= snap; ErrNotFound if it had none.
func (c *Catalog) GetAt(source, id string, snap int64) (block.Meta, error) {
	m, err := c.Get(source, id)
	if err != nil || snap == 0 || m.Seq <= snap {
		return m, err
	}
	old, ok, err := c.versionAt(source, id, snap)
	if err != nil {
		return block.Meta{}, err
	}
	if !ok {
		return block.Meta{}, fmt.Errorf("block %s/%s at snapshot %d: %w", source, id, snap, ErrNotFound)
	}
	return old, nil
}

// Versions returns every catalogued version of a block, oldest first (the
// last is Get's); GC removes those no pin can see.
func (c *Catalog) Versions(source, id string) ([]block.Meta, error) {
	cur, err := c.Get(source, id)
	if err != nil {
		return nil, err
	}
	p := historyPrefix(source, id)
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(slices.Clone(p[:len(p)-1]), 1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []block.Meta
	for ok := it.First(); ok; ok = it.Next() {
		m, err := c.decode(it.Value())
		if err != nil {
			return nil, fmt.Errorf("catalog: block %s/%s history: %w", source, id, err)
		}
		out = append(out, m)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return append(out, cur), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Covered returns the catalogued coverage of a Kafka partition, ordered by
// window and first offset. Ingestion uses it after a restart to skip records
// that are already in blocks.
func (c *Catalog) Covered(topic string, partition int32) ([]Coverage, error) {
	p := partitionPrefix(topic, partition)
	upper := binary.BigEndian.AppendUint32(slices.Clone(p[:len(p)-4]), uint32(partition)+1)
	if partition == math.MaxInt32 {
		upper = append(slices.Clone(p), 0xff)
	}
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Coverage
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(p)+16 {
			continue
		}
		var e offsetEntry
		if err := json.Unmarshal(it.Value(), &e); err != nil {
			return nil, fmt.Errorf("catalog: offset index: %w", err)
		}
		out = append(out, Coverage{
			Window: int64(binary.BigEndian.Uint64(k[len(p):]) ^ (1 << 63)),
			First:  int64(binary.BigEndian.Uint64(k[len(p)+8:])),
			Last:   e.Last, ID: e.ID, MaxEventTime: e.MaxEventTime,
		})
	}
	return out, it.Error()
}

// Generation returns the last generation handed out by NextGeneration (0 if
// none).
func (c *Catalog) Generation() (int64, error) {
	v, closer, err := c.db.Get(keyGeneration)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("catalog: generation value of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// NextGeneration durably increments and returns the generation counter. Each
// ingestion process takes one at start and stamps it on the blocks it writes.
func (c *Catalog) NextGeneration() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.Generation()
	if err != nil {
		return 0, err
	}
	return g + 1, c.setGeneration(g + 1)
}

func (c *Catalog) setGeneration(g int64) error {
	return c.db.Set(keyGeneration, binary.BigEndian.AppendUint64(nil, uint64(g)), pebble.Sync)
}

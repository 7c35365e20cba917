package matching

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The matching cache (paper IV.A: "this cache holds the components of all
// transformations that SIG has previously memoized"), in Pebble. Its key
// layout is keys.go's; only the Cache's methods read or write Pebble, so
// the frontend and the search index (frontend.go, search.go) know neither
// the store nor a key's bytes.

// FormatVersion is the on-disk format of the cache; Open refuses others.
const FormatVersion = "1"

var (
	// ErrNotFound: no such component, memo entry or pipeline.
	ErrNotFound = errors.New("matching: not found")
	// ErrFormat: the directory holds a cache of another format.
	ErrFormat = errors.New("matching: cache format mismatch")
)

// ComponentRecord is what the cache keeps per component.
type ComponentRecord struct {
	Key     canon.Key `json:"key"`
	Source  string    `json:"source"`
	Type    string    `json:"type"`
	Columns []string  `json:"columns"`
	Ops     []string  `json:"ops"`
	Nodes   int       `json:"nodes"`
	DSL     string    `json:"dsl"` // canonical DSL, one input named out
	Created time.Time `json:"created"`
	// NodeKeys are the keys of every node of the component (search index).
	NodeKeys []canon.Key `json:"node_keys"`
}

// MemoState is the state of one memoized block.
type MemoState uint8

// Memo states.
const (
	MemoPending MemoState = 1 + iota
	MemoReady
	MemoFailed
)

func (s MemoState) String() string {
	switch s {
	case MemoPending:
		return "pending"
	case MemoReady:
		return "ready"
	case MemoFailed:
		return "failed"
	}
	return "unknown"
}

// MemoEntry is the state of one (component, block).
type MemoEntry struct {
	Component canon.Key
	Block     blockref.Memo
	State     MemoState
	Object    string
	Rows      int64
	Bytes     int64
	Error     string
	Updated   time.Time
	// Gen identifies one incarnation of the entry: a pending entry created
	// after an eviction has a new Gen, so a worker that started before the
	// eviction cannot mark the new incarnation ready (see MarkReady).
	Gen uint64
}

// PipelineInput is one model input of a registered pipeline.
type PipelineInput struct {
	Name      string    `json:"name"`
	Component canon.Key `json:"component"`
	Type      string    `json:"type"`
	// Cover is the insertion policy's cover of the component, decided when
	// the pipeline was submitted. Nil in a record written before covers:
	// the whole component is memoized, as the paper's SIG does.
	Cover *Cover `json:"cover,omitempty"`
}

// Cover is which nodes of a model input's component are memoized (issue 20,
// matching/insertion): readers fetch the memo nodes and compute the
// residual ops above them. Memo is exactly the component's key when the
// whole component is memoized, empty when readers compute it from raw
// columns.
type Cover struct {
	Memo []canon.Key `json:"memo"`
	// Residual is the component's canonical DSL with the memo nodes as
	// memo("<key prefix>"), for people.
	Residual string `json:"residual,omitempty"`
	Reason   string `json:"reason"`
	// Override is the owner's override ("always", "never"), if any.
	Override string `json:"override,omitempty"`
}

// MemoKeys are the keys whose memo entries the input reads: its cover's
// memo nodes, or its component (a record from before covers).
func (in *PipelineInput) MemoKeys() []canon.Key {
	if in.Cover == nil {
		return []canon.Key{in.Component}
	}
	return in.Cover.Memo
}

// Computed reports whether readers compute the input (its component is not
// memoized whole).
func (in *PipelineInput) Computed() bool {
	return in.Cover != nil && !(len(in.Cover.Memo) == 1 && in.Cover.Memo[0] == in.Component)
}

// usedKeys are the keys a pipeline uses: its inputs' components and their
// covers' memo nodes, each once, in input order.
func (p *Pipeline) usedKeys() []canon.Key {
	var out []canon.Key
	seen := map[canon.Key]bool{}
	for i := range p.Inputs {
		for _, k := range append([]canon.Key{p.Inputs[i].Component}, p.Inputs[i].MemoKeys()...) {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// memoKeys are the keys whose memo entries a pipeline reads, each once, in
// input order.
func (p *Pipeline) memoKeys() []canon.Key {
	var out []canon.Key
	seen := map[canon.Key]bool{}
	for i := range p.Inputs {
		for _, k := range p.Inputs[i].MemoKeys() {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// Memoizes reports whether the pipeline reads k's memo entries (k is one
// of its covers' memo nodes, or a component of a record from before
// covers).
func (p *Pipeline) Memoizes(k canon.Key) bool {
	for i := range p.Inputs {
		if slices.Contains(p.Inputs[i].MemoKeys(), k) {
			return true
		}
	}
	return false
}

// Pipeline is a registered training pipeline.
type Pipeline struct {
	Client    string          `json:"client"`
	Name      string          `json:"name"`
	Priority  int32           `json:"priority"`
	Source    string          `json:"source"`
	From      int64           `json:"from"`
	To        int64           `json:"to"`
	Inputs    []PipelineInput `json:"inputs"`
	Graph     string          `json:"graph"`     // the graph as submitted, printed as DSL
	Submitted time.Time       `json:"submitted"` // the first registration (a re-submit keeps it)
}

// Cache is the Pebble-backed matching cache.
type Cache struct {
	db *pebble.DB
	mu sync.Mutex // serializes read-modify-write of memo entries

	// records holds decoded component records, read through: a record
	// never changes once written and is never deleted, so entries need no
	// invalidation (were records ever deleted, the deletion would have to
	// drop them here). Every submit and read solution reads the record of
	// each of its components; decoding JSON from Pebble each time was most
	// of a cached submit's cost.
	recMu   sync.RWMutex
	records map[canon.Key]*ComponentRecord

	// touched remembers the last-requested time last written per
	// component, so that a component requested again within
	// TouchGranularity is not rewritten: repeated submits and reads of a
	// cached graph then write nothing, which keeps Pebble's memtable
	// flushes and compactions (the submit latency tail) away.
	touchMu sync.Mutex
	touched map[canon.Key]time.Time
	// Entries older than TouchGranularity no longer save a write and are
	// dropped by a sweep, which runs when touched reaches sweepAt (twice
	// what the last sweep left, at least minTouchSweep: O(1) a request
	// amortized) or, past minTouchSweep entries, touchSweepEvery after the
	// last one (so that a burst's entries do not stay for good when
	// requests slow down).
	sweepAt   int
	lastSweep time.Time
}

// touchSweepEvery bounds how long needsTouch keeps entries it no longer
// needs while it is past minTouchSweep.
const touchSweepEvery = 10 * TouchGranularity

const minTouchSweep = 1024

// TouchGranularity is the resolution of last-requested times: eviction
// policies work in minutes, so a second is plenty.
const TouchGranularity = time.Second

// needsTouch reports whether k's last-requested time must be written for a
// request at t, and records that it will be.
func (c *Cache) needsTouch(k canon.Key, t time.Time) bool {
	c.touchMu.Lock()
	defer c.touchMu.Unlock()
	if c.touched == nil {
		c.touched = map[canon.Key]time.Time{}
	}
	if last, ok := c.touched[k]; ok && t.Sub(last) < TouchGranularity {
		return false
	}
	if n := len(c.touched); n >= c.sweepAt || n > minTouchSweep && t.Sub(c.lastSweep) >= touchSweepEvery {
		c.lastSweep = t
		for key, last := range c.touched {
			if t.Sub(last) >= TouchGranularity {
				delete(c.touched, key)
			}
		}
		c.sweepAt = max(2*len(c.touched), minTouchSweep)
	}
	c.touched[k] = t
	return true
}

// maxCachedRecords bounds Cache.records; when full, an arbitrary entry
// makes room.
const maxCachedRecords = 1 << 14

// CacheOptions configure a Cache.
type CacheOptions struct {
	// Durability of writes: process crashes by default, machine crashes
	// with pebbleutil.DurabilityMachine.
	Durability pebbleutil.Durability
	// BlockCacheBytes is Pebble's block cache. Default 128 MiB: a submit
	// reads every component record and memo entry of its graph, and with
	// Pebble's own default (8 MiB) a cache of 100k components misses on
	// most of them.
	BlockCacheBytes int64
}

// OpenCache opens or creates the cache in dir.
func OpenCache(dir string, opts CacheOptions) (*Cache, error) {
	if opts.BlockCacheBytes <= 0 {
		opts.BlockCacheBytes = 128 << 20
	}
	bc := pebble.NewCache(opts.BlockCacheBytes)
	defer bc.Unref()
	db, err := pebbleutil.Open(dir, opts.Durability, &pebble.Options{Cache: bc})
	if err != nil {
		return nil, err
	}
	c := &Cache{db: db, records: map[canon.Key]*ComponentRecord{}}
	v, ok, err := pebbleutil.Get(db, formatKey)
	if err != nil {
		db.Close()
		return nil, err
	}
	if !ok {
		if err := db.Set(formatKey, []byte(FormatVersion), pebble.Sync); err != nil {
			db.Close()
			return nil, err
		}
	} else if string(v) != FormatVersion {
		db.Close()
		return nil, fmt.Errorf("%w: %s holds format %q, this build reads %q", ErrFormat, dir, v, FormatVersion)
	}
	return c, nil
}

// Close closes the cache.
func (c *Cache) Close() error { return c.db.Close() }

// PebbleMetrics returns the store's Pebble figures (block cache,
// compactions, levels), for pebbleutil.Collector.
func (c *Cache) PebbleMetrics() *pebble.Metrics { return c.db.Metrics() }

// Compact flushes and compacts the whole cache, so that reads and writes
// no longer compete with compactions owed by earlier writes (after a bulk
// load, before measuring a settled cache).
func (c *Cache) Compact(ctx context.Context) error {
	if err := c.db.Flush(); err != nil {
		return err
	}
	return c.db.Compact(ctx, []byte{0}, []byte{0xff}, true)
}

func (c *Cache) wopts() *pebble.WriteOptions { return pebbleutil.WriteOptions }

// Component returns a component's record.
func (c *Cache) Component(k canon.Key) (ComponentRecord, error) {
	c.recMu.RLock()
	r, ok := c.records[k]
	c.recMu.RUnlock()
	if ok {
		return r.clone(), nil
	}
	v, ok, err := pebbleutil.Get(c.db, componentKey(k))
	if err != nil {
		return ComponentRecord{}, err
	}
	if !ok {
		return ComponentRecord{}, fmt.Errorf("%w: component %s", ErrNotFound, k)
	}
	r = &ComponentRecord{}
	if err := json.Unmarshal(v, r); err != nil {
		return ComponentRecord{}, fmt.Errorf("component %s: corrupt record: %w", k, err)
	}
	c.recMu.Lock()
	if len(c.records) >= maxCachedRecords {
		for old := range c.records {
			delete(c.records, old)
			break
		}
	}
	c.records[k] = r
	c.recMu.Unlock()
	return r.clone(), nil
}

// clone copies r so that callers may change what they get.
func (r *ComponentRecord) clone() ComponentRecord {
	out := *r
	out.Columns = slices.Clone(r.Columns)
	out.Ops = slices.Clone(r.Ops)
	out.NodeKeys = slices.Clone(r.NodeKeys)
	return out
}

// HasComponent reports whether the component is in the cache.
func (c *Cache) HasComponent(k canon.Key) (bool, error) {
	c.recMu.RLock()
	_, ok := c.records[k]
	c.recMu.RUnlock()
	if ok {
		return true, nil
	}
	_, ok, err := pebbleutil.Get(c.db, componentKey(k))
	return ok, err
}

// putComponent adds the component record and its search index entries.
func putComponent(b *pebble.Batch, r *ComponentRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := b.Set(componentKey(r.Key), v, nil); err != nil {
		return err
	}
	for _, n := range r.NodeKeys {
		if err := b.Set(indexKey(nodePrefix(n), r.Key), nil, nil); err != nil {
			return err
		}
	}
	for _, op := range r.Ops {
		if err := b.Set(indexKey(opPrefix(op), r.Key), nil, nil); err != nil {
			return err
		}
	}
	for _, col := range r.Columns {
		if err := b.Set(indexKey(columnPrefix(col), r.Key), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// RegisterPipeline records a submit in one batch: the records (and search
// index entries) of the components added, which the cache did not hold
// (model inputs' components and their covers' memo nodes alike); the
// last-requested time of every key p uses; p as a user of those keys and no
// longer of those only old used (old is p's previous registration, nil if
// none); and p itself unless it is old unchanged. An identical re-submit
// within TouchGranularity writes nothing.
func (c *Cache) RegisterPipeline(p *Pipeline, old *Pipeline, added []ComponentRecord, at time.Time) error {
	b := c.db.NewBatch()
	defer b.Close()
	for i := range added {
		if err := putComponent(b, &added[i]); err != nil {
			return err
		}
	}
	oldUses := map[canon.Key]bool{}
	if old != nil {
		for _, k := range old.usedKeys() {
			oldUses[k] = true
		}
	}
	seen := map[canon.Key]bool{}
	for _, k := range p.usedKeys() {
		seen[k] = true
		if err := c.setRequested(b, k, at); err != nil {
			return err
		}
		if !oldUses[k] {
			if err := b.Set(userKey(k, p.Client, p.Name), nil, nil); err != nil {
				return err
			}
		}
	}
	for k := range oldUses {
		if !seen[k] {
			if err := b.Delete(userKey(k, p.Client, p.Name), nil); err != nil {
				return err
			}
		}
	}
	pv, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if ov, err := json.Marshal(old); old == nil || err != nil || string(ov) != string(pv) {
		if err := b.Set(pipelineKey(p.Client, p.Name), pv, nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(c.wopts())
}

// LastRequested returns when the component was last requested.
func (c *Cache) LastRequested(k canon.Key) (time.Time, error) {
	v, ok, err := pebbleutil.Get(c.db, requestedKey(k))
	if err != nil || !ok {
		return time.Time{}, err
	}
	t, _ := decodeRequested(v)
	return t, nil
}

// setRequested adds k's last-requested time to b, unless it was written
// less than TouchGranularity ago (needsTouch).
func (c *Cache) setRequested(b *pebble.Batch, k canon.Key, at time.Time) error {
	if !c.needsTouch(k, at) {
		return nil
	}
	return b.Set(requestedKey(k), encodeRequested(at), nil)
}

// Touch records that the components were requested at the given time.
func (c *Cache) Touch(keys []canon.Key, at time.Time) error {
	b := c.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := c.setRequested(b, k, at); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(c.wopts())
}

// Users returns the pipelines (client, pipeline) using a component: as a
// model input's component, or as a memo node of an input's cover.
func (c *Cache) Users(k canon.Key) ([][2]string, error) {
	var out [][2]string
	pfx := userPrefix(k)
	err := pebbleutil.Scan(c.db, pfx, func(key, _ []byte) (bool, error) {
		if client, pipeline, ok := decodeUser(key[len(pfx):]); ok {
			out = append(out, [2]string{client, pipeline})
		}
		return true, nil
	})
	return out, err
}

// Memo returns the entry of one (component, block).
func (c *Cache) Memo(k canon.Key, block blockref.Memo) (MemoEntry, error) {
	v, ok, err := pebbleutil.Get(c.db, memoKey(k, block))
	if err != nil {
		return MemoEntry{}, err
	}
	if !ok {
		return MemoEntry{}, fmt.Errorf("%w: memo %s/%s", ErrNotFound, k.Short(), block)
	}
	return decodeMemo(k, block, v)
}

// Memos returns every memo entry of a component, by block id.
func (c *Cache) Memos(k canon.Key) (map[blockref.Memo]MemoEntry, error) {
	s, err := c.newMemoScanner()
	if err != nil {
		return nil, err
	}
	out, err := s.memos(k)
	if cerr := s.close(); err == nil {
		err = cerr
	}
	return out, err
}

// eachMemo calls fn with every memo entry of component k, in block order.
func (c *Cache) eachMemo(k canon.Key, fn func(MemoEntry) error) error {
	pfx := memoPrefix(k)
	return pebbleutil.Scan(c.db, pfx, func(key, v []byte) (bool, error) {
		e, err := decodeMemo(k, blockref.ParseMemo(string(key[len(pfx):])), v)
		if err != nil {
			return false, err
		}
		return true, fn(e)
	})
}

// eachMemoOfAll calls fn with every memo entry of the cache, in component
// then block order.
func (c *Cache) eachMemoOfAll(fn func(MemoEntry)) error {
	return pebbleutil.Scan(c.db, memosPrefix, func(key, v []byte) (bool, error) {
		k, block := decodeMemoKey(key)
		e, err := decodeMemo(k, block, v)
		if err != nil {
			return false, err
		}
		fn(e)
		return true, nil
	})
}

// memoScanner reads the memo entries of several components through one
// Pebble iterator: a read solution reads the entries of every component of
// its graph, and creating an iterator per component cost more than the
// reads. It sees the cache as of its creation.
type memoScanner struct{ it *pebble.Iterator }

func (c *Cache) newMemoScanner() (*memoScanner, error) {
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: memosPrefix, UpperBound: pebbleutil.PrefixEnd(memosPrefix)})
	if err != nil {
		return nil, err
	}
	return &memoScanner{it: it}, nil
}

// memos returns every memo entry of component k, by block id.
func (s *memoScanner) memos(k canon.Key) (map[blockref.Memo]MemoEntry, error) {
	out := map[blockref.Memo]MemoEntry{}
	pfx := memoPrefix(k)
	for ok := s.it.SeekGE(pfx); ok && bytes.HasPrefix(s.it.Key(), pfx); ok = s.it.Next() {
		v, err := s.it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		block := blockref.ParseMemo(string(s.it.Key()[len(pfx):]))
		e, err := decodeMemo(k, block, v)
		if err != nil {
			return nil, err
		}
		out[block] = e
	}
	return out, s.it.Error()
}

func (s *memoScanner) close() error { return s.it.Close() }

// SetMemo writes a memo entry.
func (c *Cache) SetMemo(e MemoEntry) error {
	return c.db.Set(memoKey(e.Component, e.Block), encodeMemo(&e), c.wopts())
}

// UpdateMemo atomically reads, changes and writes one memo entry. f gets
// ok=false when there is none; returning false from f writes nothing.
func (c *Cache) UpdateMemo(k canon.Key, block blockref.Memo, f func(e *MemoEntry, ok bool) bool) (MemoEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.Memo(k, block)
	ok := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return e, err
	}
	if !ok {
		e = MemoEntry{Component: k, Block: block}
	}
	if !f(&e, ok) {
		return e, nil
	}
	return e, c.db.Set(memoKey(k, block), encodeMemo(&e), c.wopts())
}

// DeleteMemo removes a memo entry.
func (c *Cache) DeleteMemo(k canon.Key, block blockref.Memo) error {
	return c.db.Delete(memoKey(k, block), c.wopts())
}

// DeleteMemos removes every memo entry of a component in one batch and
// returns them.
func (c *Cache) DeleteMemos(k canon.Key) ([]MemoEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []MemoEntry
	b := c.db.NewBatch()
	defer b.Close()
	pfx := memoPrefix(k)
	err := pebbleutil.Scan(c.db, pfx, func(key, v []byte) (bool, error) {
		e, err := decodeMemo(k, blockref.ParseMemo(string(key[len(pfx):])), v)
		if err != nil {
			return false, err
		}
		out = append(out, e)
		return true, b.Delete(key, nil)
	})
	if err != nil {
		return nil, err
	}
	return out, b.Commit(c.wopts())
}

// Pipeline returns a registered pipeline.
func (c *Cache) Pipeline(client, name string) (Pipeline, error) {
	v, ok, err := pebbleutil.Get(c.db, pipelineKey(client, name))
	if err != nil {
		return Pipeline{}, err
	}
	if !ok {
		return Pipeline{}, fmt.Errorf("%w: pipeline %s/%s", ErrNotFound, client, name)
	}
	var p Pipeline
	if err := json.Unmarshal(v, &p); err != nil {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s: corrupt record: %w", client, name, err)
	}
	return p, nil
}

// Pipelines returns every registered pipeline, of one client or of all when
// client is empty.
func (c *Cache) Pipelines(client string) ([]Pipeline, error) {
	var out []Pipeline
	err := pebbleutil.Scan(c.db, pipelinePrefix(client), func(_, v []byte) (bool, error) {
		var p Pipeline
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		out = append(out, p)
		return true, nil
	})
	return out, err
}

// SetPipelinePriority changes a registered pipeline's priority.
func (c *Cache) SetPipelinePriority(client, name string, prio int32) (Pipeline, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.Pipeline(client, name)
	if err != nil {
		return p, err
	}
	p.Priority = prio
	v, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	return p, c.db.Set(pipelineKey(client, name), v, c.wopts())
}

// usedBy returns the components used by a client's pipelines (or one
// pipeline; every client's when client is empty). It decodes only the
// pipelines' inputs: a search filtering by a client reads all of its
// pipelines.
func (c *Cache) usedBy(client, pipeline string) ([]canon.Key, error) {
	var p struct {
		Name   string `json:"name"`
		Inputs []struct {
			Component canon.Key   `json:"component"`
			Memo      []canon.Key `json:"-"`
			Cover     *struct {
				Memo []canon.Key `json:"memo"`
			} `json:"cover"`
		} `json:"inputs"`
	}
	seen := map[canon.Key]bool{}
	var out []canon.Key
	err := pebbleutil.Scan(c.db, pipelinePrefix(client), func(_, v []byte) (bool, error) {
		p.Name, p.Inputs = "", p.Inputs[:0]
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		for i := range p.Inputs {
			if p.Inputs[i].Memo = nil; p.Inputs[i].Cover != nil {
				p.Inputs[i].Memo = p.Inputs[i].Cover.Memo
			}
		}
		if pipeline != "" && p.Name != pipeline {
			return true, nil
		}
		for _, in := range p.Inputs {
			for _, k := range append([]canon.Key{in.Component}, in.Memo...) {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
		return true, nil
	})
	return out, err
}

// ComponentKeys returns every component key in the cache, in key order.
func (c *Cache) ComponentKeys() ([]canon.Key, error) {
	return c.indexScan(componentPrefix(nil), 0)
}

// indexScan returns the component keys listed under an index prefix (the
// key suffix after the prefix is the 32-byte component key).
func (c *Cache) indexScan(pfx []byte, limit int) ([]canon.Key, error) {
	var out []canon.Key
	err := pebbleutil.Scan(c.db, pfx, func(key, _ []byte) (bool, error) {
		out = append(out, keyAt(key, len(pfx)))
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// ContainingNode returns the components that contain the node with key n.
func (c *Cache) ContainingNode(n canon.Key, limit int) ([]canon.Key, error) {
	return c.indexScan(nodePrefix(n), limit)
}

// UsingOp returns the components that use an op.
func (c *Cache) UsingOp(op string, limit int) ([]canon.Key, error) {
	return c.indexScan(opPrefix(op), limit)
}

// ReadingColumn returns the components that read a raw column.
func (c *Cache) ReadingColumn(col string, limit int) ([]canon.Key, error) {
	return c.indexScan(columnPrefix(col), limit)
}

// The index as sorted streams of component keys, for Search's join.

// containingNode, usingOp and readingColumn stream the components an index
// prefix lists.
func (c *Cache) containingNode(n canon.Key) (keySource, error) {
	pfx := nodePrefix(n)
	return c.newIndexSource(pfx, len(pfx), nil)
}

func (c *Cache) usingOp(op string) (keySource, error) {
	pfx := opPrefix(op)
	return c.newIndexSource(pfx, len(pfx), nil)
}

func (c *Cache) readingColumn(col string) (keySource, error) {
	pfx := columnPrefix(col)
	return c.newIndexSource(pfx, len(pfx), nil)
}

// componentsWithPrefix streams the cached components whose keys start with
// the bytes keyPrefix (all of them when it is empty) and that keep accepts
// (all when nil).
func (c *Cache) componentsWithPrefix(keyPrefix []byte, keep func(canon.Key) bool) (keySource, error) {
	return c.newIndexSource(componentPrefix(keyPrefix), len(componentPrefix(nil)), keep)
}

// indexSource streams the component keys of the cache's keys under a
// prefix, where each key is a fixed head (the index prefix, or the
// component prefix) followed by a 32-byte component key, so they come in
// component key order. The prefix may extend into the component key (key
// prefix search).
type indexSource struct {
	it   *pebble.Iterator
	head int // length of the head before the component key
	keep func(canon.Key) bool
	buf  []byte
}

func (c *Cache) newIndexSource(pfx []byte, head int, keep func(canon.Key) bool) (*indexSource, error) {
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: pfx, UpperBound: pebbleutil.PrefixEnd(pfx)})
	if err != nil {
		return nil, err
	}
	return &indexSource{it: it, head: head, keep: keep, buf: append([]byte(nil), pfx[:head]...)}, nil
}

func (s *indexSource) seek(k canon.Key) (canon.Key, bool, error) {
	s.buf = append(s.buf[:s.head], k[:]...)
	for ok := s.it.SeekGE(s.buf); ok; ok = s.it.Next() {
		key := s.it.Key()
		if len(key) != s.head+keyLen {
			continue // not of this shape; none is written so
		}
		out := keyAt(key, s.head)
		if s.keep == nil || s.keep(out) {
			return out, true, nil
		}
	}
	return canon.Key{}, false, s.it.Error()
}

func (s *indexSource) close() { s.it.Close() }

// Reuse summarizes how memoized blocks are shared (paper IV.A: "the
// average data block stored in the cache is utilized by 22 different
// models"; VII.B: "each memoized component was used by 22 models on
// average, but the peak could be higher than 400").
type Reuse struct {
	Components int
	Pipelines  int
	// ReadyBlocks, PendingBlocks and FailedBlocks count memo entries.
	ReadyBlocks, PendingBlocks, FailedBlocks int64
	// ReadyBytes is the size of all ready memo objects.
	ReadyBytes int64
	// PipelinesPerBlockMean and Max: pipelines using each ready block.
	PipelinesPerBlockMean float64
	PipelinesPerBlockMax  int
	// BlocksByPipelines[n] is the number of ready blocks used by exactly n
	// pipelines (its last element is not zero; empty without ready
	// blocks): the whole distribution, for percentiles. A ready block no
	// registered pipeline covers any more counts at n = 0.
	BlocksByPipelines []int64
}

// Reuse walks the cache (cost linear in its size; callers cache the
// result). A ready memo block (component k, block b) is used by the
// registered pipelines that have k among the memo keys of their inputs
// (their covers' memo nodes) and whose event range covers b, as blocks
// lists it: the very walk a read solution makes (Frontend.resolve), so a
// pipeline counts for the blocks its read solution names and no others.
//
// Its memory is the pipelines' (their ranges, the blocks those cover, the
// keys they use without reading their memo entries), not the cache's: it
// walks the memo entries and the user index together, both in key order,
// counting one key's users at a time. (A map of every component's users
// per block, built first, was 4 GB of sigd's RSS at a million components:
// bench/scale.txt.)
func (c *Cache) Reuse(blocks Blocks) (Reuse, error) {
	var r Reuse
	ranges, err := c.pipelineRanges(blocks)
	if err != nil {
		return r, err
	}
	r.Pipelines = len(ranges.of)
	users, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxUser}, UpperBound: []byte{pfxUser + 1}})
	if err != nil {
		return r, err
	}
	defer users.Close()
	// uses are the current component's users by range: (range, pipelines).
	var uses [][2]int
	var pfx []byte
	cur, started := canon.Key{}, false
	var sum int64
	var cols []string // the current component's columns, once needed
	haveCols := false
	err = pebbleutil.Scan(c.db, memosPrefix, func(key, v []byte) (bool, error) {
		k := keyAt(key, 1)
		if !started || k != cur {
			cur, started, uses, haveCols = k, true, uses[:0], false
			pfx = append(append(pfx[:0], pfxUser), k[:]...) // userPrefix(k), without an allocation per component
			for ok := users.SeekGE(pfx); ok && bytes.HasPrefix(users.Key(), pfx); ok = users.Next() {
				name := users.Key()[len(pfx):]
				ri, ok := ranges.of[string(name)]
				if !ok || ranges.unread[string(name)][k] {
					continue // not a registered pipeline, or not reading k's entries
				}
				i := 0
				for i < len(uses) && uses[i][0] != ri {
					i++
				}
				if i == len(uses) {
					uses = append(uses, [2]int{ri, 0})
				}
				uses[i][1]++
			}
			if err := users.Error(); err != nil {
				return false, err
			}
		}
		state, size, err := memoStateBytes(v)
		if err != nil {
			return false, fmt.Errorf("memo entry %s/%s: %w", k.Short(), key[1+keyLen:], err)
		}
		switch state {
		case MemoReady:
			r.ReadyBlocks++
			r.ReadyBytes += size
			u := 0
			// The entry's block and input version; a ref without a version
			// suffix (nearly all) is looked up without a string allocated.
			ref := key[1+keyLen:]
			var m blockref.Memo
			v := int64(1)
			if bytes.Contains(ref, []byte(".v")) {
				m = blockref.ParseMemo(string(ref))
				v = m.InputVersion()
			}
			for _, ru := range uses {
				var blk *Block
				if m.IsZero() {
					blk = ranges.covers[ru[0]][string(ref)]
				} else {
					blk = ranges.covers[ru[0]][m.ID()]
				}
				if blk == nil {
					continue
				}
				ok := false
				// The entry of the block's current data in k's columns
				// (issue 21): an entry of another input version is one no
				// read solution names now (GC removes it with its version).
				if len(blk.ColumnVersions) == 0 {
					ok = v == 1
				} else {
					if !haveCols {
						rec, err := c.Component(k)
						if err != nil {
							return false, err
						}
						cols, haveCols = rec.Columns, true
					}
					ok = blk.InputVersion(cols) == v
				}
				if ok {
					u += ru[1]
				}
			}
			sum += int64(u)
			r.PipelinesPerBlockMax = max(r.PipelinesPerBlockMax, u)
			for len(r.BlocksByPipelines) <= u {
				r.BlocksByPipelines = append(r.BlocksByPipelines, 0)
			}
			r.BlocksByPipelines[u]++
		case MemoPending:
			r.PendingBlocks++
		case MemoFailed:
			r.FailedBlocks++
		}
		return true, nil
	})
	if err != nil {
		return r, err
	}
	if r.ReadyBlocks > 0 {
		r.PipelinesPerBlockMean = float64(sum) / float64(r.ReadyBlocks)
	}
	err = pebbleutil.Scan(c.db, componentPrefix(nil), func(_, _ []byte) (bool, error) { r.Components++; return true, nil })
	return r, err
}

// pipelineRanges are the registered pipelines' event ranges: of maps a
// pipeline (client\x00name, as its user keys end) to its range's index,
// covers[i] are the blocks range i covers, by id. Ranges repeat across a
// fleet, so there are few.
type pipelineRanges struct {
	of     map[string]int
	covers []map[string]*Block
	// unread[pipeline] are the keys the pipeline uses (the user index
	// names it) whose memo entries it does not read: components its
	// readers compute over their covers' memo nodes.
	unread map[string]map[canon.Key]bool
}

func (c *Cache) pipelineRanges(blocks Blocks) (pipelineRanges, error) {
	type span struct {
		source   string
		from, to int64
	}
	index := map[span]int{}
	out := pipelineRanges{of: map[string]int{}, unread: map[string]map[canon.Key]bool{}}
	err := pebbleutil.Scan(c.db, pipelinePrefix(""), func(key, v []byte) (bool, error) {
		var p Pipeline
		if err := json.Unmarshal(v, &p); err != nil {
			return false, fmt.Errorf("pipeline %q: %w", key[1:], err)
		}
		// The user index names every key p uses; p reads the memo
		// entries of its memo keys only.
		memo := map[canon.Key]bool{}
		for _, k := range p.memoKeys() {
			memo[k] = true
		}
		for _, k := range p.usedKeys() {
			if !memo[k] {
				if out.unread[string(key[1:])] == nil {
					out.unread[string(key[1:])] = map[canon.Key]bool{}
				}
				out.unread[string(key[1:])][k] = true
			}
		}
		sp := span{p.Source, p.From, p.To}
		i, ok := index[sp]
		if !ok {
			bs, err := blocks.Range(p.Source, p.From, p.To)
			if err != nil {
				return false, err
			}
			ids := make(map[string]*Block, len(bs))
			for i := range bs {
				ids[bs[i].Ref.ID()] = &bs[i]
			}
			i = len(out.covers)
			index[sp] = i
			out.covers = append(out.covers, ids)
		}
		out.of[string(key[1:])] = i
		return true, nil
	})
	return out, err
}

// AuditEntry records one eviction: who, when, what, why, and its impact.
type AuditEntry struct {
	ID         string      `json:"id"`
	Who        string      `json:"who"`
	When       time.Time   `json:"when"`
	What       string      `json:"what"`
	Why        string      `json:"why"`
	Components []canon.Key `json:"components"`
	Pipelines  []string    `json:"pipelines"`
	Blocks     int         `json:"blocks"`
	Bytes      int64       `json:"bytes"`
	Objects    int         `json:"objects"`
}

// AppendAudit stores an audit entry; entries list newest first.
func (c *Cache) AppendAudit(e AuditEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return c.db.Set(auditKey(e.When, e.ID), v, c.wopts())
}

// Audit returns up to limit audit entries, newest first.
func (c *Cache) Audit(limit int) ([]AuditEntry, error) {
	var out []AuditEntry
	err := pebbleutil.Scan(c.db, auditPrefix, func(_, v []byte) (bool, error) {
		var e AuditEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, err
		}
		out = append(out, e)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

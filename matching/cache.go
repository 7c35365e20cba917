package matching

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// The matching cache (paper IV.A: "this cache holds the components of all
// transformations that SIG has previously memoized"), in Pebble. Its key
// layout is keys.go's; only the Cache's methods read or write Pebble, so
// the frontend and the search (frontend.go, search.go) know neither the
// store nor a key's bytes. This file opens and closes it; the records it
// keeps are records.go's, and each kind is read and written in its own
// file: components.go, pipelines.go (with the user index), requested.go
// (last-requested times), memoentries.go, index.go (the search index),
// audit.go and stats.go (the insertion policy's measurements).

// FormatVersion is the on-disk format of the cache; Open refuses others.
const FormatVersion = "1"

var (
	// ErrNotFound: no such component, memo entry or pipeline.
	ErrNotFound = errors.New("matching: not found")
	// ErrFormat: the directory holds a cache of another format.
	ErrFormat = errors.New("matching: cache format mismatch")
)

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

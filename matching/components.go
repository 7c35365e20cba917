package matching

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// Component records (prefix c), written with their search index entries
// (index.go reads those). A record never changes once written and is never
// deleted, so the Cache keeps decoded records read through.

// maxCachedRecords bounds Cache.records; when full, an arbitrary entry
// makes room.
const maxCachedRecords = 1 << 14

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

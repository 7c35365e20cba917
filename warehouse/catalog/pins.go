package catalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Pin records, durably, that name reads the catalog as of snapshot snap (0:
// the current snapshot), so GC keeps every version snap sees. Pinning a
// name again moves its pin. It returns the snapshot pinned.
func (c *Catalog) Pin(name string, snap int64) (int64, error) {
	if err := block.ValidateName("pin name", name); err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.seq()
	if err != nil {
		return 0, err
	}
	switch {
	case snap < 0 || snap > cur:
		return 0, fmt.Errorf("catalog: pin %s: snapshot %d is not in [1, %d] (the current snapshot)", name, snap, cur)
	case snap == 0:
		snap = cur
	}
	if err := c.db.Set(pinKey(name), binary.BigEndian.AppendUint64(nil, uint64(snap)), pebble.Sync); err != nil {
		return 0, fmt.Errorf("catalog: pin %s: %w", name, err)
	}
	return snap, nil
}

// Unpin removes a pin; removing one that does not exist is not an error.
func (c *Catalog) Unpin(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.db.Delete(pinKey(name), pebble.Sync); err != nil {
		return fmt.Errorf("catalog: unpin %s: %w", name, err)
	}
	return nil
}

// Pins returns the pins by name.
func (c *Catalog) Pins() (map[string]int64, error) {
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte("p\x00"), UpperBound: []byte("p\x01")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[string]int64{}
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Value()) != 8 {
			return nil, fmt.Errorf("catalog: pin %q: value of %d bytes", it.Key()[2:], len(it.Value()))
		}
		out[string(it.Key()[2:])] = int64(binary.BigEndian.Uint64(it.Value()))
	}
	return out, it.Error()
}

// GC removes from the catalog every superseded block version that neither
// "now" nor any pin sees, and returns their metadata: the caller deletes
// their objects afterwards (DeleteObjects), so a crash between the two
// leaves an orphan object, which is harmless, never a catalogued version
// without its object. Version 1 objects of a block are superseded like any
// other; the newest version of a block is never removed.
//
// Snapshot s sees version v of a block when v's Seq <= s < the Seq of the
// version after v.
func (c *Catalog) GC() ([]block.Meta, error) { return c.GCUpTo(math.MaxInt64) }

// GCUpTo is GC keeping also every version superseded after snapshot
// horizon: a reader that resolved a block a moment ago without a pin still
// finds the version it resolved (ingestion passes the snapshot of its
// grace period's start).
func (c *Catalog) GCUpTo(horizon int64) ([]block.Meta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pins, err := c.Pins()
	if err != nil {
		return nil, err
	}
	snaps := make([]int64, 0, len(pins))
	for _, s := range pins {
		snaps = append(snaps, s)
	}
	slices.Sort(snaps)
	seen := func(seq, next int64) bool {
		// The smallest pinned snapshot >= seq must be < next.
		i, _ := slices.BinarySearch(snaps, seq)
		return i < len(snaps) && snaps[i] < next
	}
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte("h\x00"), UpperBound: []byte("h\x01")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	b := c.db.NewBatch()
	defer b.Close()
	var out []block.Meta
	// Entries of one block are adjacent and in version order; each one's
	// successor is the next entry of the same block, or the block's
	// current version.
	var prev *block.Meta
	var prevKey []byte
	flush := func(next block.Meta) {
		if prev != nil && prev.ID == next.ID && prev.Source == next.Source && next.Seq <= horizon && !seen(prev.Seq, next.Seq) {
			b.Delete(prevKey, nil)
			out = append(out, *prev)
		}
	}
	for ok := it.First(); ok; ok = it.Next() {
		m, err := c.decode(it.Value())
		if err != nil {
			return nil, fmt.Errorf("catalog: history %q: %w", it.Key(), err)
		}
		if prev != nil && (prev.ID != m.ID || prev.Source != m.Source) {
			cur, err := c.Get(prev.Source, prev.ID)
			if err != nil {
				return nil, err
			}
			flush(cur)
		} else {
			flush(m)
		}
		prev, prevKey = &m, bytes.Clone(it.Key())
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if prev != nil {
		cur, err := c.Get(prev.Source, prev.ID)
		if err != nil {
			return nil, err
		}
		flush(cur)
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("catalog: gc: %w", err)
	}
	return out, nil
}

// DeleteObjects deletes the objects of the versions GC returned. Run it
// after GC: the catalog no longer names them.
func DeleteObjects(ctx context.Context, store *objstore.Store, ms []block.Meta) (int, error) {
	keys := make([]string, 0, len(ms))
	for _, m := range ms {
		if m.Key != "" {
			keys = append(keys, m.Key)
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := store.DeleteMany(ctx, keys)
	if err != nil {
		return n, fmt.Errorf("catalog: delete superseded versions: %w", err)
	}
	return n, nil
}

// CollectGarbage runs GC and deletes the objects of what it removed, with no
// grace period. The long-running processes do not call it: ingestion runs
// GCUpTo with its grace horizon and DeleteObjects, and sigd runs GCUpTo and
// drops the memo entries of the removed versions before it deletes objects.
func CollectGarbage(ctx context.Context, c *Catalog, store *objstore.Store) ([]block.Meta, error) {
	ms, err := c.GC()
	if err != nil {
		return nil, err
	}
	if _, err := DeleteObjects(ctx, store, ms); err != nil {
		return ms, err
	}
	return ms, nil
}

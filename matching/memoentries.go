package matching

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Memo entries in the cache (prefix b): one per (component, memo block
// ref), read one at a time, per component (several through one iterator:
// memoScanner) or all at once; UpdateMemo reads, changes and writes one
// atomically, UpdateMemos several in one batch (the members of one pack).
// What the states mean and who changes them is memo.go's.
//
// Every write of an entry keeps the pack index (prefix m, issue 28) in
// step in the same batch: an entry naming a pack's column has a key under
// the pack, removed when the entry goes or names another object. So the
// entries a pack serves are one prefix (PackNamed), and the objects an
// entry's removal frees are known without listing the bucket (Unnamed).

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

// putMemo adds to b the write of entry e over old (nil: none), with the
// pack index in step: old's key under its pack removed unless e names the
// same pack, e's added when it names one.
func putMemo(b *pebble.Batch, old, e *MemoEntry) error {
	if old != nil && old.Packed() && !(e.Packed() && e.Object == old.Object) {
		if err := b.Delete(packMemberKey(old.Object, old.Component, old.Block), nil); err != nil {
			return err
		}
	}
	if e.Packed() {
		if err := b.Set(packMemberKey(e.Object, e.Component, e.Block), nil, nil); err != nil {
			return err
		}
	}
	return b.Set(memoKey(e.Component, e.Block), encodeMemo(e), nil)
}

// dropMemo adds to b the deletion of entry old and of its key under its
// pack.
func dropMemo(b *pebble.Batch, old *MemoEntry) error {
	if old.Packed() {
		if err := b.Delete(packMemberKey(old.Object, old.Component, old.Block), nil); err != nil {
			return err
		}
	}
	return b.Delete(memoKey(old.Component, old.Block), nil)
}

// current returns the entry of (k, block), ok false when there is none.
func (c *Cache) current(k canon.Key, block blockref.Memo) (MemoEntry, bool, error) {
	e, err := c.Memo(k, block)
	if errors.Is(err, ErrNotFound) {
		return MemoEntry{Component: k, Block: block}, false, nil
	}
	return e, err == nil, err
}

// SetMemo writes a memo entry.
func (c *Cache) SetMemo(e MemoEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok, err := c.current(e.Component, e.Block)
	if err != nil {
		return err
	}
	b := c.db.NewBatch()
	defer b.Close()
	var prev *MemoEntry
	if ok {
		prev = &old
	}
	if err := putMemo(b, prev, &e); err != nil {
		return err
	}
	return b.Commit(c.wopts())
}

// UpdateMemo atomically reads, changes and writes one memo entry. f gets
// ok=false when there is none; returning false from f writes nothing.
func (c *Cache) UpdateMemo(k canon.Key, block blockref.Memo, f func(e *MemoEntry, ok bool) bool) (MemoEntry, error) {
	es, err := c.UpdateMemos([]Task{{Component: k, Block: block}}, func(_ int, e *MemoEntry, ok bool) bool { return f(e, ok) })
	if len(es) == 0 {
		return MemoEntry{Component: k, Block: block}, err
	}
	return es[0], err
}

// UpdateMemos is UpdateMemo of several entries in one batch: f is called
// with each (its index in ids), and every entry it changes is written at
// once, or none. It returns the entries as f left them. The members of
// one pack are switched to it so (Memos.CompletePack): a pack is named by
// all the entries it was written for, or by none.
func (c *Cache) UpdateMemos(ids []Task, f func(i int, e *MemoEntry, ok bool) bool) ([]MemoEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.NewBatch()
	defer b.Close()
	out := make([]MemoEntry, len(ids))
	for i, id := range ids {
		old, ok, err := c.current(id.Component, id.Block)
		if err != nil {
			return out[:i], err
		}
		e := old
		if !f(i, &e, ok) {
			out[i] = e
			continue
		}
		e.Component, e.Block = id.Component, id.Block
		var prev *MemoEntry
		if ok {
			prev = &old
		}
		if err := putMemo(b, prev, &e); err != nil {
			return out[:i], err
		}
		out[i] = e
	}
	if b.Empty() {
		return out, nil
	}
	return out, b.Commit(c.wopts())
}

// DeleteMemo removes a memo entry.
func (c *Cache) DeleteMemo(k canon.Key, block blockref.Memo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok, err := c.current(k, block)
	if err != nil || !ok {
		return err
	}
	b := c.db.NewBatch()
	defer b.Close()
	if err := dropMemo(b, &old); err != nil {
		return err
	}
	return b.Commit(c.wopts())
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
		return true, dropMemo(b, &e)
	})
	if err != nil {
		return nil, err
	}
	return out, b.Commit(c.wopts())
}

// PackNamed reports whether some memo entry names a column of pack object.
func (c *Cache) PackNamed(object string) (bool, error) {
	named := false
	err := pebbleutil.Scan(c.db, packPrefix(object), func(_, _ []byte) (bool, error) {
		named = true
		return false, nil
	})
	return named, err
}

// PackEntries lists the entries naming a column of pack object, in key
// order.
func (c *Cache) PackEntries(object string) ([]MemoEntry, error) {
	pfx := packPrefix(object)
	var ids []Task
	err := pebbleutil.Scan(c.db, pfx, func(key, _ []byte) (bool, error) {
		if len(key) < len(pfx)+keyLen {
			return false, fmt.Errorf("pack index key %q: corrupt", key)
		}
		ids = append(ids, Task{Component: keyAt(key, len(pfx)), Block: blockref.ParseMemo(string(key[len(pfx)+keyLen:]))})
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]MemoEntry, 0, len(ids))
	for _, id := range ids {
		e, err := c.Memo(id.Component, id.Block)
		if errors.Is(err, ErrNotFound) {
			continue // removed since the scan
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Unnamed returns the objects that removed entries (deleted, or moved to
// other objects) leave without an entry naming them, each once: an object
// of one component with its entry, a pack once no entry names a column of
// it any more. The caller deletes them after the entries (a crash in
// between leaves orphans, which the evictor's sweep deletes, never an
// entry without its object). Called after the removal, so that of two
// removals of a pack's last members one at least sees it unnamed. A
// pending or failed entry that names no pack has no object: the key it
// names is where a worker that predates packs would write, and what such
// a worker wrote after all is the evictor's sweep's.
func (c *Cache) Unnamed(removed []MemoEntry) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, e := range removed {
		if e.Object == "" || seen[e.Object] || (e.State != MemoReady && !e.Packed()) {
			continue
		}
		seen[e.Object] = true
		if e.Packed() {
			named, err := c.PackNamed(e.Object)
			if err != nil {
				return out, err
			}
			if named {
				continue
			}
		}
		out = append(out, e.Object)
	}
	return out, nil
}

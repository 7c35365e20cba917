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
// atomically. What the states mean and who changes them is memo.go's.

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

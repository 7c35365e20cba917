package matching

import (
	"encoding/json"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// The search index in the cache, which search.go queries: the components
// containing a node (n), using an op (o) and reading a raw column (k),
// written with their records (components.go), and the components of a
// client's pipelines, read from the pipelines' records. Each is listed, or
// streamed in component key order for Search's join.

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

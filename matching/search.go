package matching

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/matching/canon"
)

// The graph search index (paper IV.A, "Eviction": "SIG incorporates a
// search infrastructure that indexes transformation graphs based on various
// attributes, including the raw features they read, the training pipelines
// that utilize them"). The index lives in the cache (prefixes n, o, k and u;
// see cache.go); a query intersects the sorted key streams of its filters
// (see Search).

// Query filters components; every given filter must match.
type Query struct {
	Column    string // reads this raw column
	Op        string // uses this op
	Client    string // used by a pipeline of this client
	Pipeline  string // used by this pipeline (with Client, or any client)
	KeyPrefix string // key starts with these hex digits
	// Subgraph is a DSL expression: components that contain it after
	// canonicalization, so renamed bindings and reordered commutative
	// operands still match.
	Subgraph string
	// NodeKey: components containing the node with this key.
	NodeKey string
	Source  string // the raw source of Subgraph ("ads" when empty)
	Limit   int    // 0: 100
	// After is the key to continue after (paging), as hex.
	After string
}

// ComponentInfo is a search result.
type ComponentInfo struct {
	Record        ComponentRecord
	LastRequested time.Time
	Pipelines     [][2]string // client, pipeline
	Ready         int
	Pending       int
	Failed        int
	Bytes         int64
}

// SubgraphKey canonicalizes a DSL expression over a source and returns its
// key.
func (f *Frontend) SubgraphKey(expr, source string) (canon.Key, error) {
	if source == "" {
		source = "ads"
	}
	s, err := f.schema(source)
	if err != nil {
		return canon.Key{}, err
	}
	if len(expr) > f.cfg.Limits.MaxSourceBytes {
		return canon.Key{}, inputErr("subgraph", "expression is larger than %d bytes", f.cfg.Limits.MaxSourceBytes)
	}
	k, _, err := canon.KeyOf(expr, s, f.cfg.Registry)
	if err != nil {
		return canon.Key{}, &InputError{Field: "subgraph", Err: err}
	}
	return k, nil
}

// Search returns the components matching q, in key order, and the key to
// continue after when there are more.
//
// Every filter is a sorted stream of component keys (an index prefix of
// the cache, or a small sorted list for pipelines), and a page is their
// intersection from After on: a zig-zag join seeks each stream to the
// largest key any of them is at until they agree, so a query costs what
// its page and the keys it skips cost, not the size of its broadest
// filter (a subgraph such as lower(col("query")) is in most components).
// BenchmarkSubgraphSearch100k in eviction measures it.
func (f *Frontend) Search(q Query) ([]ComponentInfo, string, error) {
	c := f.cfg.Cache
	limit := q.Limit
	if limit <= 0 || limit > 10000 {
		limit = 100
	}
	var srcs []keySource
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	index := func(pfx []byte, head int, keep func(canon.Key) bool) error {
		s, err := newIndexSource(c, pfx, head, keep)
		if err != nil {
			return err
		}
		srcs = append(srcs, s)
		return nil
	}
	if q.Subgraph != "" {
		k, err := f.SubgraphKey(q.Subgraph, q.Source)
		if err != nil {
			return nil, "", err
		}
		if err := index(key1(pfxNode, k), 1+len(k), nil); err != nil {
			return nil, "", err
		}
	}
	if q.NodeKey != "" {
		k, err := canon.ParseKey(q.NodeKey)
		if err != nil {
			return nil, "", &InputError{Field: "node_key", Err: err}
		}
		if err := index(key1(pfxNode, k), 1+len(k), nil); err != nil {
			return nil, "", err
		}
	}
	if q.Column != "" {
		pfx := []byte(string(pfxColumn) + q.Column + "\x00")
		if err := index(pfx, len(pfx), nil); err != nil {
			return nil, "", err
		}
	}
	if q.Op != "" {
		pfx := []byte(string(pfxOp) + q.Op + "\x00")
		if err := index(pfx, len(pfx), nil); err != nil {
			return nil, "", err
		}
	}
	if q.Client != "" || q.Pipeline != "" {
		keys, err := c.usedBy(q.Client, q.Pipeline)
		if err != nil {
			return nil, "", err
		}
		sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i][:], keys[j][:]) < 0 })
		srcs = append(srcs, &sliceSource{keys: keys})
	}
	if q.KeyPrefix != "" {
		p := strings.ToLower(q.KeyPrefix)
		if len(p) > 64 {
			return nil, "", &InputError{Field: "key_prefix", Err: fmt.Errorf("longer than a key")}
		}
		for _, ch := range p {
			if !strings.ContainsRune("0123456789abcdef", ch) {
				return nil, "", &InputError{Field: "key_prefix", Err: fmt.Errorf("%q is not hex", p)}
			}
		}
		// Whole bytes narrow the scan; an odd last digit is filtered.
		whole, _ := hex.DecodeString(p[:len(p)/2*2])
		var keep func(canon.Key) bool
		if len(p)%2 == 1 {
			keep = func(k canon.Key) bool { return strings.HasPrefix(k.String(), p) }
		}
		if err := index(append([]byte{pfxComponent}, whole...), 1, keep); err != nil {
			return nil, "", err
		}
	}
	if len(srcs) == 0 {
		if err := index([]byte{pfxComponent}, 1, nil); err != nil {
			return nil, "", err
		}
	}
	var from canon.Key
	if q.After != "" {
		after, err := canon.ParseKey(q.After)
		if err != nil {
			return nil, "", &InputError{Field: "page_token", Err: err}
		}
		var ok bool
		if from, ok = successor(after); !ok {
			return nil, "", nil
		}
	}
	keys, err := join(srcs, from, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(keys) > limit {
		keys = keys[:limit]
		next = keys[limit-1].String()
	}
	out := make([]ComponentInfo, 0, len(keys))
	for _, k := range keys {
		info, err := f.Info(k)
		if err != nil {
			return nil, "", err
		}
		out = append(out, info)
	}
	return out, next, nil
}

// keySource is a sorted stream of component keys.
type keySource interface {
	// seek returns the first key >= k, or ok=false at the end.
	seek(k canon.Key) (canon.Key, bool, error)
	close()
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

func newIndexSource(c *Cache, pfx []byte, head int, keep func(canon.Key) bool) (*indexSource, error) {
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
		if len(key) != s.head+len(k) {
			continue // not of this shape; none is written so
		}
		var out canon.Key
		copy(out[:], key[s.head:])
		if s.keep == nil || s.keep(out) {
			return out, true, nil
		}
	}
	return canon.Key{}, false, s.it.Error()
}

func (s *indexSource) close() { s.it.Close() }

// sliceSource streams a sorted list.
type sliceSource struct{ keys []canon.Key }

func (s *sliceSource) seek(k canon.Key) (canon.Key, bool, error) {
	i := sort.Search(len(s.keys), func(i int) bool { return bytes.Compare(s.keys[i][:], k[:]) >= 0 })
	if i == len(s.keys) {
		return canon.Key{}, false, nil
	}
	return s.keys[i], true, nil
}

func (s *sliceSource) close() {}

// join returns up to n keys, from `from` on, that every source holds, in
// order (a zig-zag merge join).
func join(srcs []keySource, from canon.Key, n int) ([]canon.Key, error) {
	var out []canon.Key
	cur := from
	for len(out) < n {
		agree := true
		for _, s := range srcs {
			k, ok, err := s.seek(cur)
			if err != nil || !ok {
				return out, err
			}
			if k != cur {
				cur, agree = k, false
			}
		}
		if !agree {
			continue
		}
		out = append(out, cur)
		var ok bool
		if cur, ok = successor(cur); !ok {
			break
		}
	}
	return out, nil
}

// successor returns the next key in order (k + 1), ok=false after the
// last.
func successor(k canon.Key) (canon.Key, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		k[i]++
		if k[i] != 0 {
			return k, true
		}
	}
	return k, false
}

// Info describes one component: its record, users and memo blocks.
func (f *Frontend) Info(k canon.Key) (ComponentInfo, error) {
	c := f.cfg.Cache
	rec, err := c.Component(k)
	if err != nil {
		return ComponentInfo{}, err
	}
	info := ComponentInfo{Record: rec}
	if info.LastRequested, err = c.LastRequested(k); err != nil {
		return info, err
	}
	if info.Pipelines, err = c.Users(k); err != nil {
		return info, err
	}
	err = pebbleutil.Scan(c.db, key1(pfxMemo, k), func(key, v []byte) (bool, error) {
		e, err := decodeMemo(k, string(key[33:]), v)
		if err != nil {
			return false, err
		}
		switch e.State {
		case MemoReady:
			info.Ready++
			info.Bytes += e.Bytes
		case MemoPending:
			info.Pending++
		case MemoFailed:
			info.Failed++
		}
		return true, nil
	})
	return info, err
}

// Related returns the cached components that contain k as a subgraph and
// those that k contains.
func (f *Frontend) Related(k canon.Key) (containedBy, contains []canon.Key, err error) {
	c := f.cfg.Cache
	by, err := c.ContainingNode(k, 0)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range by {
		if o != k {
			containedBy = append(containedBy, o)
		}
	}
	rec, err := c.Component(k)
	if err != nil {
		return nil, nil, err
	}
	for _, nk := range rec.NodeKeys {
		n, err := canon.ParseKey(nk)
		if err != nil || n == k {
			continue
		}
		if ok, err := c.HasComponent(n); err != nil {
			return nil, nil, err
		} else if ok {
			contains = append(contains, n)
		}
	}
	return containedBy, contains, nil
}

// usedBy returns the components used by a client's pipelines (or one
// pipeline). It decodes only the pipelines' inputs: a search filtering by
// a client reads all of its pipelines.
func (c *Cache) usedBy(client, pipeline string) ([]canon.Key, error) {
	pfx := []byte{pfxPipeline}
	if client != "" {
		pfx = []byte(string(pfxPipeline) + client + "\x00")
	}
	var p struct {
		Name   string `json:"name"`
		Inputs []struct {
			Component string `json:"component"`
		} `json:"inputs"`
	}
	seen := map[canon.Key]bool{}
	var out []canon.Key
	err := pebbleutil.Scan(c.db, pfx, func(_, v []byte) (bool, error) {
		p.Name, p.Inputs = "", p.Inputs[:0]
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		if pipeline != "" && p.Name != pipeline {
			return true, nil
		}
		for _, in := range p.Inputs {
			k, err := canon.ParseKey(in.Component)
			if err == nil && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		return true, nil
	})
	return out, err
}

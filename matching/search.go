package matching

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sigdata/sig/internal/pebbleutil"
)

// The graph search index (paper IV.A, "Eviction": "SIG incorporates a
// search infrastructure that indexes transformation graphs based on various
// attributes, including the raw features they read, the training pipelines
// that utilize them"). The index lives in the cache (prefixes n, o, k and u;
// see cache.go); a query intersects the candidate sets of its filters.

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
func (f *Frontend) SubgraphKey(expr, source string) (Key, error) {
	if source == "" {
		source = "ads"
	}
	s, err := f.schema(source)
	if err != nil {
		return Key{}, err
	}
	if len(expr) > f.cfg.Limits.MaxSourceBytes {
		return Key{}, inputErr("subgraph", "expression is larger than %d bytes", f.cfg.Limits.MaxSourceBytes)
	}
	k, _, err := KeyOf(expr, s, f.cfg.Registry)
	if err != nil {
		return Key{}, &InputError{Field: "subgraph", Err: err}
	}
	return k, nil
}

// Search returns the components matching q, in key order, and the key to
// continue after when there are more.
func (f *Frontend) Search(q Query) ([]ComponentInfo, string, error) {
	c := f.cfg.Cache
	limit := q.Limit
	if limit <= 0 || limit > 10000 {
		limit = 100
	}
	var sets [][]Key
	add := func(keys []Key, err error) error {
		if err != nil {
			return err
		}
		sets = append(sets, keys)
		return nil
	}
	if q.Subgraph != "" {
		k, err := f.SubgraphKey(q.Subgraph, q.Source)
		if err != nil {
			return nil, "", err
		}
		if err := add(c.ContainingNode(k, 0)); err != nil {
			return nil, "", err
		}
	}
	if q.NodeKey != "" {
		k, err := ParseKey(q.NodeKey)
		if err != nil {
			return nil, "", &InputError{Field: "node_key", Err: err}
		}
		if err := add(c.ContainingNode(k, 0)); err != nil {
			return nil, "", err
		}
	}
	if q.Column != "" {
		if err := add(c.ReadingColumn(q.Column, 0)); err != nil {
			return nil, "", err
		}
	}
	if q.Op != "" {
		if err := add(c.UsingOp(q.Op, 0)); err != nil {
			return nil, "", err
		}
	}
	if q.Client != "" || q.Pipeline != "" {
		keys, err := c.usedBy(q.Client, q.Pipeline)
		if err := add(keys, err); err != nil {
			return nil, "", err
		}
	}
	if q.KeyPrefix != "" {
		keys, err := c.keysWithPrefix(q.KeyPrefix)
		if err != nil {
			return nil, "", &InputError{Field: "key_prefix", Err: err}
		}
		sets = append(sets, keys)
	}
	var keys []Key
	if len(sets) == 0 {
		all, err := c.ComponentKeys()
		if err != nil {
			return nil, "", err
		}
		keys = all
	} else {
		keys = intersect(sets)
	}
	if q.After != "" {
		i := sort.Search(len(keys), func(i int) bool { return keys[i].String() > strings.ToLower(q.After) })
		keys = keys[i:]
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

// intersect returns the keys in every set, sorted.
func intersect(sets [][]Key) []Key {
	sort.Slice(sets, func(i, j int) bool { return len(sets[i]) < len(sets[j]) })
	count := map[Key]int{}
	for _, s := range sets {
		seen := map[Key]bool{}
		for _, k := range s {
			if !seen[k] {
				seen[k] = true
				count[k]++
			}
		}
	}
	var out []Key
	for k, n := range count {
		if n == len(sets) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i][:]) < string(out[j][:]) })
	return out
}

// Info describes one component: its record, users and memo blocks.
func (f *Frontend) Info(k Key) (ComponentInfo, error) {
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
func (f *Frontend) Related(k Key) (containedBy, contains []Key, err error) {
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
		n, err := ParseKey(nk)
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
// pipeline).
func (c *Cache) usedBy(client, pipeline string) ([]Key, error) {
	ps, err := c.Pipelines(client)
	if err != nil {
		return nil, err
	}
	seen := map[Key]bool{}
	var out []Key
	for _, p := range ps {
		if pipeline != "" && p.Name != pipeline {
			continue
		}
		for _, in := range p.Inputs {
			k, err := ParseKey(in.Component)
			if err == nil && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// keysWithPrefix returns the component keys starting with hex digits p.
func (c *Cache) keysWithPrefix(p string) ([]Key, error) {
	p = strings.ToLower(p)
	if len(p) > 64 {
		return nil, fmt.Errorf("longer than a key")
	}
	for _, ch := range p {
		if !strings.ContainsRune("0123456789abcdef", ch) {
			return nil, fmt.Errorf("%q is not hex", p)
		}
	}
	// Whole bytes narrow the scan; an odd last digit is filtered.
	whole, _ := hex.DecodeString(p[:len(p)/2*2])
	var out []Key
	err := pebbleutil.Scan(c.db, append([]byte{pfxComponent}, whole...), func(key, _ []byte) (bool, error) {
		var k Key
		copy(k[:], key[1:])
		if strings.HasPrefix(k.String(), p) {
			out = append(out, k)
		}
		return true, nil
	})
	return out, err
}

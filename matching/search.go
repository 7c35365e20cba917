package matching

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sigdata/sig/canon"
)

// The graph search index (paper IV.A, "Eviction": "SIG incorporates a
// search infrastructure that indexes transformation graphs based on various
// attributes, including the raw features they read, the training pipelines
// that utilize them"). The index lives in the cache (prefixes n, o, k and u;
// see index.go); a query intersects the sorted key streams of its filters
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
	Source   string // the raw source of Subgraph ("ads" when empty)
	Limit    int    // 0: 100
	// After is the page token to continue after: the next token of the
	// previous page, as Search returned it. Search writes and reads it (it
	// is the last key of the page in hex); callers pass it through.
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
	add := func(s keySource, err error) error {
		if err == nil {
			srcs = append(srcs, s)
		}
		return err
	}
	if q.Subgraph != "" {
		k, err := f.SubgraphKey(q.Subgraph, q.Source)
		if err != nil {
			return nil, "", err
		}
		if err := add(c.containingNode(k)); err != nil {
			return nil, "", err
		}
	}
	if q.Column != "" {
		if err := add(c.readingColumn(q.Column)); err != nil {
			return nil, "", err
		}
	}
	if q.Op != "" {
		if err := add(c.usingOp(q.Op)); err != nil {
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
		if err := add(c.componentsWithPrefix(whole, keep)); err != nil {
			return nil, "", err
		}
	}
	if len(srcs) == 0 {
		if err := add(c.componentsWithPrefix(nil, nil)); err != nil {
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
	err = c.eachMemo(k, func(e MemoEntry) error {
		switch e.State {
		case MemoReady:
			info.Ready++
			info.Bytes += e.Bytes
		case MemoPending:
			info.Pending++
		case MemoFailed:
			info.Failed++
		}
		return nil
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
	for _, n := range rec.NodeKeys {
		if n == k {
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

package reader

import (
	"container/list"
	"encoding/binary"
	"sync"
	"sync/atomic"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// Plans are cached by input set (issue 28, item 3). Checking a unit is
// mostly work on its input set: parsing the schema, parsing and
// canonicalizing each LOCAL input's DSL into one program, and for the
// guard each MEMO input's DSL into its component's program. A job reads
// every block of its pipeline with the same inputs, so all that was done
// again for every unit: for a unit of a few hundred rows it cost more than
// the reads (bench/requests.txt). The part of a plan that depends only on
// the input set is a shape, built once per distinct input set and kept in
// a small bounded cache (Config.PlanCacheEntries); binding a unit to its
// shape checks and sets what is the unit's own (its block, raw object,
// batch rows, memo objects and states), so every unit is still checked
// whole and a reader still keeps nothing a unit needs: a miss only builds
// the shape again.
//
// The key is the input set itself (shapeKey), every field the shape is
// built from, length-prefixed: two units share a shape only when those
// fields are equal byte for byte, so no collision can give a unit
// another's plan. The guard's programs are compiled in the shape too, on
// first use (a MEMO input's DSL is run, and so checked, only on the reads
// that guard it, as before the cache: Config.GuardEvery).

// shape is the part of a plan that depends only on a unit's input set.
type shape struct {
	// tmpl is the plan of the shape, without what is the unit's own; read
	// only (bind copies it).
	tmpl *plan
	// dsls are the inputs' canonical DSLs, which the guard compiles.
	dsls []string
	// guards[i] is the guard of MEMO input i, nodeGuards[j] that of memo
	// node j, compiled on first use; nodeGuardSrc[j] is the LOCAL input
	// (index in tmpl.localIdx) whose DSL gives node j's cone.
	guards, nodeGuards []lazyGuard
	nodeGuardSrc       []int
	// compiled counts the guard programs compiled (tests).
	compiled atomic.Int64
}

// lazyGuard is a guard program compiled once, on first use.
type lazyGuard struct {
	once sync.Once
	gi   guardInput
	ok   bool // false: nothing to guard
	err  error
}

// plan finishes a shape built from tmpl: the guard's slots, and for each
// memo node the first LOCAL input listing it, whose DSL holds its cone.
func (sh *shape) plan() {
	t := sh.tmpl
	sh.guards = make([]lazyGuard, len(t.inputs))
	sh.nodeGuards = make([]lazyGuard, len(t.nodes))
	sh.nodeGuardSrc = make([]int, len(t.nodes))
	for j, nd := range t.nodes {
		sh.nodeGuardSrc[j] = -1
	search:
		for x, mns := range t.memoNodes {
			for _, mn := range mns {
				if mn.read.component == nd.component {
					sh.nodeGuardSrc[j] = x
					break search
				}
			}
		}
	}
}

// shapeKey is the input set of u: every field newShape reads, each
// length-prefixed, so that equal keys are equal fields.
func shapeKey(u *readerv1.WorkUnit) string {
	n := len(u.RawSchemaJson) + len(u.RawSource) + 16
	for _, in := range u.Inputs {
		n += len(in.Name) + len(in.ComponentKey) + len(in.Type) + len(in.CanonicalDsl) + 16
		for _, mn := range in.MemoNodes {
			n += len(mn.Key) + len(mn.Type) + 4
		}
	}
	for _, l := range u.LabelColumns {
		n += len(l) + 2
	}
	b := make([]byte, 0, n)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(u.RawSchemaJson)
	str(u.RawSource)
	b = binary.AppendUvarint(b, uint64(len(u.LabelColumns)))
	for _, l := range u.LabelColumns {
		str(l)
	}
	b = binary.AppendUvarint(b, uint64(len(u.Inputs)))
	for _, in := range u.Inputs {
		str(in.Name)
		str(in.ComponentKey)
		str(in.Type)
		b = binary.AppendUvarint(b, uint64(uint32(in.Mode)))
		str(in.CanonicalDsl)
		b = binary.AppendUvarint(b, uint64(len(in.MemoNodes)))
		for _, mn := range in.MemoNodes {
			str(mn.Key)
			str(mn.Type)
		}
	}
	return string(b)
}

// planCache keeps the shapes of the input sets planned last, least
// recently used out first, at most max of them and maxBytes of keys (a
// shape's programs grow with its DSLs, which its key holds). A key longer
// than maxBytes/16 is not kept: such a unit is planned from scratch. A nil
// planCache keeps nothing.
type planCache struct {
	max      int
	maxBytes int
	mu       sync.Mutex
	bytes    int
	lru      list.List // of *planEntry, most recent first
	index    map[string]*list.Element

	hits, misses atomic.Int64
}

type planEntry struct {
	key string
	sh  *shape
}

// DefaultPlanCacheEntries is Config.PlanCacheEntries's default: more input
// sets than the pipelines a reader serves at once (the fleet's 300
// pipelines spread over a few readers), each some KiB to a few hundred.
const DefaultPlanCacheEntries = 512

// planCacheBytes bounds the keys a plan cache holds: 64 MiB.
const planCacheBytes = 64 << 20

func newPlanCache(entries int) *planCache {
	if entries <= 0 {
		return nil
	}
	return &planCache{max: entries, maxBytes: planCacheBytes, index: map[string]*list.Element{}}
}

// PlanCacheStats count a plan cache's lookups: a miss builds a shape.
type PlanCacheStats struct {
	Hits, Misses int64
	Entries      int
}

func (c *planCache) stats() PlanCacheStats {
	if c == nil {
		return PlanCacheStats{}
	}
	c.mu.Lock()
	n := c.lru.Len()
	c.mu.Unlock()
	return PlanCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n}
}

// shape returns the shape of key, building it with build on a miss. Two
// units of a new input set arriving at once may both build it; one is
// kept.
func (c *planCache) shape(key string, build func() (*shape, error)) (*shape, error) {
	if c == nil {
		return build()
	}
	c.mu.Lock()
	if e, ok := c.index[key]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		c.hits.Add(1)
		return e.Value.(*planEntry).sh, nil
	}
	c.mu.Unlock()
	c.misses.Add(1)
	sh, err := build()
	if err != nil || len(key) > c.maxBytes/16 {
		return sh, err // a unit that does not plan is not kept
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		return e.Value.(*planEntry).sh, nil
	}
	c.index[key] = c.lru.PushFront(&planEntry{key: key, sh: sh})
	c.bytes += len(key)
	for c.lru.Len() > c.max || c.bytes > c.maxBytes {
		last := c.lru.Back()
		e := last.Value.(*planEntry)
		delete(c.index, e.key)
		c.bytes -= len(e.key)
		c.lru.Remove(last)
	}
	return sh, nil
}

// plan checks unit u and plans it, its shape from the plan cache.
func (s *Server) plan(u *readerv1.WorkUnit) (*plan, error) {
	return planUnit(u, s.cfg.Limits, func() (*shape, error) {
		return s.plans.shape(shapeKey(u), func() (*shape, error) { return newShape(u, s.cfg.Registry, s.cfg.Limits) })
	})
}

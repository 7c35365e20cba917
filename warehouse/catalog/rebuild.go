package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// RebuildReport says what Rebuild found.
type RebuildReport struct {
	// Blocks is the number of blocks catalogued.
	Blocks int
	// Superseded lists objects left out because a later generation wrote a
	// block covering the same records: blocks written by an ingestion that
	// crashed before cataloguing them, and re-cut differently after the
	// restart. They hold no record that is not in a catalogued block.
	Superseded []string
	// Unreadable lists objects under raw/ whose footer could not be read or
	// is invalid (with the reason). They are left out.
	Unreadable []string
	// Versions is the number of block versions >= 2 catalogued (Blocks
	// counts each block once).
	Versions int
	// Generation is the generation counter of the new catalog: the highest
	// generation of any object seen, so the next ingestion writes above it.
	Generation int64
}

// rebuildWorkers is how many footers Rebuild reads at once.
const rebuildWorkers = 8

// Rebuild creates a new catalog in dir (which must not exist or be empty)
// from the raw/ objects of the bucket alone, by reading each object's footer.
//
// When two blocks of one partition and window cover overlapping Kafka
// offsets, only one can have been catalogued (Add refuses overlaps), and the
// other is a block written by an ingestion generation that crashed between
// writing the object and cataloguing it; after the restart the same records
// were re-cut into blocks of a later generation. So the block of the higher
// generation wins (Superseded lists the losers), and the rebuilt catalog holds
// every record exactly once.
//
// Versions N>=2 (raw/<source>/<id>.v<N>.arrow) are catalogued with the
// blocks, each covering its change's Kafka span, in the units ingestion
// committed them in (addAll): the rebuilt catalog has every version the
// bucket holds (also those GC had not yet collected), and the same rule
// settles a version written by a crashed generation. Sequence numbers are new, and pins are
// not in the bucket: pin again after a rebuild.
func Rebuild(ctx context.Context, store *objstore.Store, dir string) (*Catalog, RebuildReport, error) {
	var rep RebuildReport
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, rep, fmt.Errorf("catalog: rebuild into %s: directory is not empty", dir)
	}
	var keys []string
	for info, err := range store.List(ctx, block.RawPrefix) {
		if err != nil {
			return nil, rep, fmt.Errorf("catalog: rebuild: %w", err)
		}
		if _, _, ok := block.ParseRawKey(info.Key); ok {
			keys = append(keys, info.Key)
		} else {
			rep.Unreadable = append(rep.Unreadable, info.Key+": not a raw block key")
		}
	}
	metas := make([]block.Meta, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range rebuildWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				metas[i], errs[i] = block.ReadFooter(ctx, store, keys[i])
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()

	var good []block.Meta
	for i, err := range errs {
		if err != nil {
			if ctx.Err() != nil || !(errors.Is(err, objstore.ErrCorrupt) || errors.Is(err, objstore.ErrNotFound)) {
				return nil, rep, fmt.Errorf("catalog: rebuild: %w", err)
			}
			rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: %v", keys[i], err))
			continue
		}
		m := metas[i]
		src, ref, _ := block.ParseRawKey(keys[i])
		if m.Source != src || m.Ref() != ref {
			// Also a version-1 block whose id ends in ".v<N>": its key
			// would name version N.
			rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: footer names block %s/%s version %d", keys[i], m.Source, m.ID, m.Ref().Version()))
			continue
		}
		rep.Generation = max(rep.Generation, m.Generation)
		good = append(good, m)
	}

	good = settleCompactions(good, &rep)
	c, err := Open(dir)
	if err != nil {
		return nil, rep, err
	}
	if err := addAll(c, good, &rep); err != nil {
		c.Close()
		return nil, rep, err
	}
	if err := c.setGeneration(rep.Generation); err != nil {
		c.Close()
		return nil, rep, err
	}
	slices.Sort(rep.Superseded)
	return c, rep, nil
}

// settleCompactions decides which compacted blocks (block.Meta.Parts) the
// bucket holds were committed, and leaves out the objects they replaced.
// The compactor writes a compacted block's object before its catalog batch
// (warehouse/ingest, "Compaction"), and the catalog refuses to compact a
// part that changed since it was read, and a part ends with the compaction:
// so a compacted block one of whose parts has an object of a newer version
// than it names was never committed, and is left out (Superseded) with its
// versions. Of compacted blocks that name a part in common (a crashed
// compaction's object and the one the next generation committed), the
// later generation's is kept. The kept ones supersede every object of
// their parts (GC may not have deleted them yet), which Rebuild leaves out.
func settleCompactions(ms []block.Meta, rep *RebuildReport) []block.Meta {
	newest := map[string]int64{} // block id -> newest version in the bucket
	type compaction struct {
		id    string
		gen   int64
		parts []block.Part
	}
	byID := map[string]*compaction{}
	var cs []*compaction
	for _, m := range ms {
		newest[m.ID] = max(newest[m.ID], m.Ref().Version())
		if len(m.Parts) == 0 {
			continue
		}
		c := byID[m.ID]
		if c == nil {
			c = &compaction{id: m.ID, gen: m.Generation, parts: m.Parts}
			byID[m.ID] = c
			cs = append(cs, c)
		}
		c.gen = min(c.gen, m.Generation) // version 1's, the compactor's
	}
	if len(cs) == 0 {
		return ms
	}
	slices.SortFunc(cs, func(a, b *compaction) int {
		return cmp.Or(cmp.Compare(b.gen, a.gen), cmp.Compare(len(b.parts), len(a.parts)), cmp.Compare(a.id, b.id))
	})
	claimed := map[string]bool{} // parts of kept compactions
	dropped := map[string]bool{} // compacted blocks left out
	for _, c := range cs {
		ok := true
		for _, p := range c.parts {
			if newest[p.ID] > p.Ref().Version() || claimed[p.ID] {
				ok = false
			}
		}
		if !ok {
			dropped[c.id] = true
			continue
		}
		for _, p := range c.parts {
			claimed[p.ID] = true
		}
	}
	out := ms[:0:0]
	for _, m := range ms {
		if claimed[m.ID] || dropped[m.ID] {
			rep.Superseded = append(rep.Superseded, m.Key)
			continue
		}
		out = append(out, m)
	}
	return out
}

// span is the Kafka records a block version brings: a version 1 block's
// Kafka range, a later version's change (false: neither, a block another
// program wrote).
func span(m block.Meta) (block.KafkaRange, bool) {
	if m.Ref().Version() == 1 {
		if m.Kafka == nil {
			return block.KafkaRange{}, false
		}
		return *m.Kafka, true
	}
	n := len(m.Changes)
	if n == 0 || m.Changes[n-1].Version != m.Ref().Version() {
		return block.KafkaRange{}, false
	}
	ch := m.Changes[n-1]
	return block.KafkaRange{Topic: ch.Topic, Partition: ch.Partition, First: ch.First, Last: ch.Last}, true
}

// unit is what one sealed buffer of ingestion wrote: the block versions
// whose records are the same span of one partition and window, from one
// generation (a new block and the new versions of the blocks its changes
// touched). Ingestion catalogued them in one Commit, and so does Rebuild.
type unit struct {
	window int64
	span   block.KafkaRange
	gen    int64
	ms     []block.Meta
}

// addAll catalogues the block versions read from the bucket, per unit. A
// unit whose span overlaps the span of a unit written by a later generation
// was written by an ingestion that crashed before cataloguing it, and after
// the restart the same records were sealed again, cut differently: it is
// superseded, whatever order the two would be added in. The others are
// committed in offset order per partition and window, which is the order
// they were made in (a block's versions follow each other in the stream);
// a unit the catalog refuses is superseded too. A version whose
// predecessors' objects GC deleted follows the newest one left, or is its
// block's first, covering the changes since (commit's rebuild mode).
func addAll(c *Catalog, ms []block.Meta, rep *RebuildReport) error {
	type key struct {
		window int64
		span   block.KafkaRange
		gen    int64
	}
	byKey := map[key]*unit{}
	var units []*unit
	for _, m := range ms {
		sp, ok := span(m)
		if len(m.Parts) > 0 && m.Ref().Version() == 1 {
			// A compacted block holds its parts' spans, not its
			// nominal range (settleCompactions chose it): it is a unit
			// alone, and its commit refuses any overlap but a shared
			// buffer's span.
			ok = false
		}
		if !ok && m.Ref().Version() > 1 {
			rep.Unreadable = append(rep.Unreadable, m.Key+": a version without the change that made it")
			continue
		}
		k := key{window: m.WindowStart, span: sp, gen: m.Generation}
		if !ok {
			k.span.Topic = "\x00" + m.Key // alone
		}
		u := byKey[k]
		if u == nil {
			u = &unit{window: k.window, span: k.span, gen: k.gen}
			byKey[k] = u
			units = append(units, u)
		}
		u.ms = append(u.ms, m)
	}
	slices.SortFunc(units, func(a, b *unit) int {
		return cmp.Or(cmp.Compare(a.span.Topic, b.span.Topic), cmp.Compare(a.span.Partition, b.span.Partition),
			cmp.Compare(a.window, b.window), cmp.Compare(a.span.First, b.span.First), cmp.Compare(b.gen, a.gen))
	})
	lost := make([]bool, len(units))
	for i, a := range units {
		for j := i + 1; j < len(units); j++ {
			b := units[j]
			if b.span.Topic != a.span.Topic || b.span.Partition != a.span.Partition || b.window != a.window || b.span.First > a.span.Last {
				break
			}
			if a.span.Overlaps(b.span) {
				switch {
				case a.gen > b.gen:
					lost[j] = true
				case b.gen > a.gen:
					lost[i] = true
				}
			}
		}
	}
	for i, u := range units {
		// Versions in version order (one unit holds one version of a
		// block at most).
		slices.SortFunc(u.ms, func(a, b block.Meta) int { return cmp.Compare(a.Key, b.Key) })
		err := ErrOverlap
		if !lost[i] {
			err = c.commit(u.ms, true)
		}
		if errors.Is(err, ErrOverlap) || errors.Is(err, ErrConflict) {
			for _, m := range u.ms {
				rep.Superseded = append(rep.Superseded, m.Key)
			}
			continue
		}
		if err != nil {
			return err
		}
		for _, m := range u.ms {
			if m.Ref().Version() == 1 {
				rep.Blocks++
			} else {
				rep.Versions++
			}
		}
	}
	return nil
}

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
// Versions N>=2 (raw/<source>/<id>.v<N>.arrow) are catalogued after the
// blocks, per block in version order, each covering its change's Kafka span
// (addVersions): the rebuilt catalog has every version the bucket holds
// (also those GC had not yet collected), and the same rule settles a version
// written by a crashed generation. Sequence numbers are new, and pins are
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
		if _, _, _, ok := block.ParseRawKeyVersion(info.Key); ok {
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
		src, id, v, _ := block.ParseRawKeyVersion(keys[i])
		if m.Source != src || m.ID != id || m.V() != v {
			// Also a version-1 block whose id ends in ".v<N>": its key
			// would name version N.
			rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: footer names block %s/%s version %d", keys[i], m.Source, m.ID, m.V()))
			continue
		}
		rep.Generation = max(rep.Generation, m.Generation)
		good = append(good, m)
	}

	var versions []block.Meta
	good = slices.DeleteFunc(good, func(m block.Meta) bool {
		if m.V() >= 2 {
			versions = append(versions, m)
			return true
		}
		return false
	})
	// Higher generations first; within a generation, id order.
	slices.SortFunc(good, func(a, b block.Meta) int {
		if c := cmp.Compare(b.Generation, a.Generation); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	c, err := Open(dir)
	if err != nil {
		return nil, rep, err
	}
	for _, m := range good {
		err := c.Add(m)
		if errors.Is(err, ErrOverlap) {
			rep.Superseded = append(rep.Superseded, m.Key)
			continue
		}
		if err != nil {
			c.Close()
			return nil, rep, err
		}
		rep.Blocks++
	}
	n, superseded, err := addVersions(c, versions)
	if err != nil {
		c.Close()
		return nil, rep, err
	}
	rep.Versions = n
	rep.Superseded = append(rep.Superseded, superseded...)
	if err := c.setGeneration(rep.Generation); err != nil {
		c.Close()
		return nil, rep, err
	}
	slices.Sort(rep.Superseded)
	return c, rep, nil
}

// changeSpan is the Kafka span of the change that made version m (N>=2).
func changeSpan(m block.Meta) (block.KafkaRange, bool) {
	n := len(m.Changes)
	if n == 0 || m.Changes[n-1].Version != m.V() {
		return block.KafkaRange{}, false
	}
	ch := m.Changes[n-1]
	return block.KafkaRange{Topic: ch.Topic, Partition: ch.Partition, First: ch.First, Last: ch.Last}, true
}

// addVersions catalogues the versions >= 2 found in the bucket, returning
// how many and the keys of those left out. A version object whose change
// span overlaps one written by a later generation was written by an
// ingestion that crashed before cataloguing it, and the records were
// applied again after the restart: it is superseded, whatever the order the
// two would be added in. The rest are added per block in version order; a
// gap (a version whose predecessor was left out) ends the block's chain,
// as does an overlap with the blocks' own coverage.
func addVersions(c *Catalog, vs []block.Meta) (int, []string, error) {
	type group struct {
		topic     string
		partition int32
		window    int64
	}
	lost := map[string]bool{}
	byGroup := map[group][]int{}
	for i, m := range vs {
		sp, ok := changeSpan(m)
		if !ok {
			lost[m.Key] = true
			continue
		}
		g := group{sp.Topic, sp.Partition, m.WindowStart}
		byGroup[g] = append(byGroup[g], i)
	}
	for _, idx := range byGroup {
		for _, i := range idx {
			a, _ := changeSpan(vs[i])
			for _, j := range idx {
				b, _ := changeSpan(vs[j])
				if i != j && a.Overlaps(b) && vs[j].Generation > vs[i].Generation {
					lost[vs[i].Key] = true
				}
			}
		}
	}
	slices.SortFunc(vs, func(a, b block.Meta) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.ID, b.ID), cmp.Compare(a.V(), b.V()))
	})
	var (
		n      int
		out    []string
		broken = map[string]bool{}
	)
	for _, m := range vs {
		bid := m.Source + "/" + m.ID
		if lost[m.Key] || broken[bid] {
			broken[bid] = true
			out = append(out, m.Key)
			continue
		}
		err := c.Add(m)
		if errors.Is(err, ErrOverlap) || errors.Is(err, ErrConflict) {
			broken[bid] = true
			out = append(out, m.Key)
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		n++
	}
	return n, out, nil
}

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
		src, id, _ := block.ParseRawKey(keys[i])
		if m.Source != src || m.ID != id {
			rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: footer names block %s/%s", keys[i], m.Source, m.ID))
			continue
		}
		rep.Generation = max(rep.Generation, m.Generation)
		good = append(good, m)
	}

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
	if err := c.setGeneration(rep.Generation); err != nil {
		c.Close()
		return nil, rep, err
	}
	slices.Sort(rep.Superseded)
	return c, rep, nil
}

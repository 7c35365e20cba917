package versions

import (
	"context"
	"errors"
	"sync"

	"github.com/sigdata/sig/warehouse/block"
)

// feedCatalog is what a follower reads of the block catalog: its change
// feed and a stored position (*catalog.Catalog).
type feedCatalog interface {
	Snapshot() (int64, error)
	ChangedSince(after int64, limit int) ([]block.Meta, int64, error)
	Position(name string) (int64, error)
	SetPosition(name string, seq int64) error
}

// follower follows the catalog's change feed from a position stored in
// the catalog under name, so that a restart resumes where the last pass
// stored it (the Manager's block versions, the Concatenator's compacted
// blocks). One pass at a time.
type follower struct {
	name string
	mu   sync.Mutex
	pos  int64 // the stored position; -1 until read
}

func newFollower(name string) *follower { return &follower{name: name, pos: -1} }

// follow passes every block the catalog added since the stored position
// to each, in sequence order, a page of pageSize at a time, and stores the
// position after each page; it returns how many blocks each handled
// (reported true). The first call reads the position (0, everything, for
// a catalog that has none). When each fails on a block the position is
// stored just before it, so the next pass starts with it. A page begun is
// finished even if ctx ends.
func (f *follower) follow(ctx context.Context, cat feedCatalog, pageSize int, each func(block.Meta) (bool, error)) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pos < 0 {
		pos, err := cat.Position(f.name)
		if err != nil {
			return 0, err
		}
		f.pos = pos
	}
	snap, err := cat.Snapshot()
	if err != nil || snap <= f.pos {
		return 0, err
	}
	n := 0
	for ctx.Err() == nil {
		ms, next, err := cat.ChangedSince(f.pos, pageSize)
		if err != nil {
			return n, err
		}
		for _, b := range ms {
			handled, err := each(b)
			if err != nil {
				// Everything before b is done.
				return n, errors.Join(err, f.store(cat, b.Seq-1))
			}
			if handled {
				n++
			}
		}
		if err := f.store(cat, next); err != nil {
			return n, err
		}
		if len(ms) < pageSize {
			break
		}
	}
	return n, nil
}

// store records that every block up to seq was followed.
func (f *follower) store(cat feedCatalog, seq int64) error {
	if seq <= f.pos {
		return nil
	}
	if err := cat.SetPosition(f.name, seq); err != nil {
		return err
	}
	f.pos = seq
	return nil
}

// position is the stored position (-1 before the first pass).
func (f *follower) position() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

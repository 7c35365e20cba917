package matching

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Memo entries per input version (issue 21). A raw block can change after
// it was sealed; each change is a new version of the block, written whole.
// A memo entry is for (component, block, input version), where the input
// version is the newest version at which one of the raw columns the
// component reads changed (Block.InputVersion). It is addressed by a memo
// block ref: the block id for input version 1 (the keys, objects and tests
// of blocks that never changed are what they always were), "<id>.v<N>" for
// N >= 2 (memo object memo/<key>/<id>.v<N>.arrow). So a change of labels
// only leaves every feature component's input version, ref and entry as
// they were: nothing is recomputed; a change of a feature column gives
// exactly the components reading it a new ref, whose entry is missing:
// created pending and scheduled (BlockChanged, or the next read solution).

// BlockOf is a catalogued raw block version as the frontend sees it: the
// one conversion from the catalog's metadata.
func BlockOf(m block.Meta) Block {
	return Block{Ref: m.Ref(), RawObject: m.Key, MinEvent: m.MinEventTime, MaxEvent: m.MaxEventTime, Rows: m.Rows,
		ColumnVersions: m.ColumnVersions, Parts: m.Parts}
}

// ColumnVersion is the version at which column c's values last changed.
func (b *Block) ColumnVersion(c string) int64 {
	return block.InputVersionOf(b.ColumnVersions, []string{c})
}

// InputVersion is the version of the data a reader of columns sees in this
// version of the block: the largest of their column versions (1 when none
// changed). Two versions with the same input version for a set of columns
// hold the same rows with the same values in those columns.
func (b *Block) InputVersion(columns []string) int64 {
	return block.InputVersionOf(b.ColumnVersions, columns)
}

// MemoRef is the memo block ref of a component reading columns over this
// version of the block.
func (b *Block) MemoRef(columns []string) blockref.Memo { return b.Ref.Memo(b.InputVersion(columns)) }

// changedColumns are the columns whose values changed since version 1 (in
// key order): the only ones whose readers' entries can differ from version
// 1's.
func (b *Block) changedColumns() []string {
	var out []string
	for c, v := range b.ColumnVersions {
		if v > 1 {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Invalidation is what a new block version made: the components reading a
// changed column (Candidates), the memo entries it created pending (Tasks:
// those of components some registered pipeline memoizes over a range
// covering the block, at their new input version) and the Enqueue calls
// (one per task and pipeline asking, at that pipeline's priority).
type Invalidation struct {
	Candidates int
	Tasks      []Task
	Enqueued   int
}

// BlockChanged makes the memo entries a new version b of a raw block of
// source needs: for every component reading a column that changed since
// version 1 (the k index) and memoized by a registered pipeline whose
// event range covers the block, the entry of its input version in b, when
// it is missing, created pending and scheduled for each such pipeline at
// that pipeline's priority. A component whose columns did not change keeps
// its ref and entry (a label update recomputes nothing), and one whose ref
// already has an entry is left alone, so calling it again, or for a
// version after a missed one, only adds what is missing. sigd calls it for
// each version the catalog adds; read solutions create whatever it has not.
func (f *Frontend) BlockChanged(source string, b Block) (Invalidation, error) {
	var inv Invalidation
	cache := f.cfg.Cache
	seen := map[canon.Key]bool{}
	var cands []canon.Key
	for _, col := range b.changedColumns() {
		ks, err := cache.ReadingColumn(col, 0)
		if err != nil {
			return inv, err
		}
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				cands = append(cands, k)
			}
		}
	}
	slices.SortFunc(cands, func(a, b canon.Key) int { return bytes.Compare(a[:], b[:]) })
	now := f.cfg.Clock.Now()
	prio := map[[2]string]*Pipeline{}
	for _, k := range cands {
		rec, err := cache.Component(k)
		if err != nil {
			return inv, err
		}
		if rec.Source != source {
			continue
		}
		inv.Candidates++
		users, err := cache.Users(k)
		if err != nil {
			return inv, err
		}
		var asking []*Pipeline
		for _, u := range users {
			p, ok := prio[u]
			if !ok {
				pp, err := cache.Pipeline(u[0], u[1])
				if errors.Is(err, ErrNotFound) {
					prio[u] = nil
					continue
				}
				if err != nil {
					return inv, err
				}
				p = &pp
				prio[u] = p
			}
			if p == nil || p.Source != source || !p.Memoizes(k) || b.MaxEvent < p.From || b.MinEvent >= p.To {
				continue
			}
			asking = append(asking, p)
		}
		if len(asking) == 0 {
			continue
		}
		ref := b.MemoRef(rec.Columns)
		var created bool
		e, err := f.createMissing(k, ref, now, &created)
		if err != nil {
			return inv, err
		}
		if !created || e.Gen == 0 {
			continue
		}
		inv.Tasks = append(inv.Tasks, Task{Component: k, Block: ref})
		f.watch.notify(k, e)
		for _, p := range asking {
			if err := f.cfg.Scheduler.Enqueue(k, ref, p.Client, p.Name, p.Priority); err != nil {
				return inv, err
			}
			inv.Enqueued++
		}
	}
	f.stats.tasksEnqueued.Add(uint64(inv.Enqueued))
	return inv, nil
}

// DropVersions removes the memo entries no catalogued version of a block
// can be read at any more: removed are versions of one block the catalog
// no longer keeps (its GC: no pin and not "now" sees them), live the
// versions it still keeps (the newest among them). An entry of a removed
// version is kept when a live version has the same input version for the
// component's columns (it is that version's entry too). Only components
// reading a column that changed between the removed version and the newest
// can lose one (the k index), so dropping a version whose change was a
// label update touches only components reading labels. It returns the
// removed entries; the caller deletes their objects after (entry first: a
// crash in between leaves an orphan object, never an entry without one).
func (f *Frontend) DropVersions(source string, removed, live []Block) ([]MemoEntry, error) {
	if len(live) == 0 || len(removed) == 0 {
		return nil, nil
	}
	newest := live[0]
	for _, l := range live[1:] {
		if l.Ref.Version() > newest.Ref.Version() {
			newest = l
		}
	}
	cache := f.cfg.Cache
	var out []MemoEntry
	for _, m := range removed {
		if m.Ref.ID() != newest.Ref.ID() {
			return out, fmt.Errorf("matching: versions of blocks %s and %s mixed", m.Ref, newest.Ref)
		}
		cols := map[string]bool{}
		for c, v := range newest.ColumnVersions {
			if v > m.ColumnVersion(c) {
				cols[c] = true
			}
		}
		seen := map[canon.Key]bool{}
		for _, col := range slices.Sorted(maps.Keys(cols)) {
			ks, err := cache.ReadingColumn(col, 0)
			if err != nil {
				return out, err
			}
			for _, k := range ks {
				if seen[k] {
					continue
				}
				seen[k] = true
				rec, err := cache.Component(k)
				if err != nil {
					return out, err
				}
				if rec.Source != source {
					continue
				}
				ref := m.MemoRef(rec.Columns)
				if slices.ContainsFunc(live, func(l Block) bool { return l.MemoRef(rec.Columns) == ref }) {
					continue
				}
				var e MemoEntry
				var gone bool
				err = f.Evicting([]canon.Key{k}, func() error {
					var err error
					e, err = cache.Memo(k, ref)
					if errors.Is(err, ErrNotFound) {
						gone = true
						return nil
					}
					if err != nil {
						return err
					}
					return cache.DeleteMemo(k, ref)
				})
				if err != nil {
					return out, err
				}
				if !gone {
					out = append(out, e)
				}
			}
		}
	}
	return out, nil
}

package matching

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Memo entries of compacted blocks (issue 28). A compacted block is a new
// block (warehouse/compact) whose version 1 holds its parts' rows one
// after the other. Read solutions create its entries pending like any new
// block's, and workers compute them; but where every part's entry of a
// component is ready and the component is row-wise, its column over the
// compacted block is the parts' columns one after the other, and package
// versions concatenates them into a pack instead (versions.Concatenator):
// Compacted says what could be, CompleteConcatenated names the pack.

// ConcatCandidate is a component whose entry of a compacted block could
// be concatenated from its parts' entries.
type ConcatCandidate struct {
	Component canon.Key
	Record    ComponentRecord
	// Block is the compacted block's memo block for the component: its id
	// at input version 1.
	Block blockref.Memo
	// Parts are the parts' entries, in the compacted block's order, each
	// of its part at the version compacted: all ready when Left is "".
	Parts []MemoEntry
	// Left, when not "", is why the entry is left to the normal path
	// (created pending by a read solution and computed by a worker): a
	// part's entry is not ready, or the compacted block's is ready
	// already.
	Left string
}

// Compacted lists the components whose entries of compacted block c of
// source might be concatenated: every component some registered pipeline
// of source memoizes over an event range covering c, whose memo block in
// newest (c's newest version) is still c's at input version 1 (a later
// version that changed a column it reads needs another entry, which the
// normal path makes). parts are c's parts as catalogued at the versions c
// names (c.Parts), in that order: each candidate's Parts are their
// entries of the component, at each part's input version for its columns.
// Candidates are in key order; those with a part not ready, or whose entry
// of c is ready already, say so (Left).
func (f *Frontend) Compacted(source string, c, newest Block, parts []Block) ([]ConcatCandidate, error) {
	if len(c.Parts) == 0 || c.Ref.Version() != 1 || newest.Ref.ID() != c.Ref.ID() {
		return nil, fmt.Errorf("matching: block %s is not a compacted block's version 1 (or %s not its newest)", c.Ref, newest.Ref)
	}
	if len(parts) != len(c.Parts) {
		return nil, fmt.Errorf("matching: %d parts given for the %d of %s", len(parts), len(c.Parts), c.Ref)
	}
	for i, p := range parts {
		if p.Ref != c.Parts[i].Ref() {
			return nil, fmt.Errorf("matching: part %d of %s is %s, given %s", i, c.Ref, c.Parts[i].Ref(), p.Ref)
		}
	}
	cache := f.cfg.Cache
	ps, err := cache.Pipelines("")
	if err != nil {
		return nil, err
	}
	seen := map[canon.Key]bool{}
	var keys []canon.Key
	for i := range ps {
		p := &ps[i]
		if p.Source != source || c.MaxEvent < p.From || c.MinEvent >= p.To {
			continue
		}
		for _, k := range p.memoKeys() {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b canon.Key) int { return bytes.Compare(a[:], b[:]) })
	var out []ConcatCandidate
	for _, k := range keys {
		rec, err := cache.Component(k)
		if err != nil {
			return nil, err
		}
		if rec.Source != source {
			continue
		}
		ref := c.MemoRef(rec.Columns)
		if newest.MemoRef(rec.Columns) != ref {
			continue
		}
		cand := ConcatCandidate{Component: k, Record: rec, Block: ref}
		if e, err := cache.Memo(k, ref); err == nil && e.State == MemoReady {
			cand.Left = "ready already"
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		for i := range parts {
			if cand.Left != "" {
				break
			}
			pref := parts[i].MemoRef(rec.Columns)
			e, err := cache.Memo(k, pref)
			switch {
			case errors.Is(err, ErrNotFound):
				cand.Left = "a part has no entry"
			case err != nil:
				return nil, err
			case e.State != MemoReady:
				cand.Left = "a part's entry is " + e.State.String()
			default:
				cand.Parts = append(cand.Parts, e)
			}
		}
		if cand.Left != "" {
			cand.Parts = nil
		}
		out = append(out, cand)
	}
	return out, nil
}

// CompleteConcatenated names pack object, written whole from the parts'
// columns (versions.Concatenator), in the entries of its members, entries
// of a compacted block: a missing entry is created ready naming the pack
// and its column (with a new generation; not while its component is being
// evicted, as createMissing), a pending one (a read solution created it
// before the concatenation) is switched to it, keeping its generation, so
// that a worker computing it finds it no longer pending (its completion
// is refused, ErrStale, and the task then finds nothing to compute), all
// in one batch (Cache.UpdateMemos). A ready entry (a worker won the race)
// or a failed one (an operator's to release) is left as it is. Members'
// Gen is ignored. It returns which members were marked; the pack is
// checked to exist, and deleted when no member took it, as for
// CompletePack, whose crash safety it shares: the pack is written before
// and named in one batch, so a crash in between leaves it unnamed (the
// evictor's sweep deletes it) and the entries as they were.
func (l *Memos) CompleteConcatenated(ctx context.Context, object string, members []Member) ([]bool, error) {
	for i := range members {
		members[i].Gen = 0
	}
	return l.completePack(ctx, object, members, true)
}

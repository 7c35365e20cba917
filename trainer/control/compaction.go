package control

import "github.com/sigdata/sig/warehouse/blockref"

// Compaction (issue 28; doc.go, "Compaction"). The warehouse compacts the
// small blocks of a closed, quiet window into a new block whose version 1
// holds their rows, in order, at the versions compacted (its Parts), and
// ends them: a snapshot after it lists the compacted block, not the parts.
// Those rows are the same event versions the parts held, so a job that
// trained a part must not train its rows again there, while a job that
// trained none of them trains the compacted block like any new block.

// lineageKind is what a job owes of a compacted block it never trained.
type lineageKind int

const (
	// lineageFresh: rows of it were never trained (some or all of its
	// parts); they are trained, without the skipped rows.
	lineageFresh lineageKind = iota
	// lineageChanged: every part was trained, some at an older version
	// than the one compacted (RetrainChanged): a retrain of those rows.
	// Also a compacted block changed since the compaction (version 2 or
	// more) of which the job trained a part: its rows can no longer be
	// told apart by part, and its version is newer than every event's in
	// it, so it is trained whole, as a changed block is.
	lineageChanged
	// lineageCovered: the job trained every part at the version compacted
	// (or at any version, RetrainNever): nothing of it is owed.
	lineageCovered
)

// lineage classifies compacted block b, which the job has not trained as a
// unit, by what it trained of its parts, and returns the rows of its
// version 1 not to train: those of the parts it trained at the version
// compacted (under RetrainNever, at any version).
func (m *Machine) lineage(b Block) (lineageKind, []RowRange) {
	var (
		skip               []RowRange
		row, skipped       int64
		trained, untouched bool
	)
	for _, p := range b.Parts {
		v, ok := m.trained[p.Ref.ID()]
		if ok {
			trained = true
		} else {
			untouched = true
		}
		if ok && (v >= p.Ref.Version() || m.cfg.Retrain == RetrainNever) && p.Rows > 0 {
			if n := len(skip); n > 0 && skip[n-1].End == row {
				skip[n-1].End += p.Rows
			} else {
				skip = append(skip, RowRange{row, row + p.Rows})
			}
			skipped += p.Rows
		}
		row += p.Rows
	}
	switch {
	case !trained:
		return lineageFresh, nil
	case b.Ref.Version() >= 2:
		if !untouched && m.cfg.Retrain == RetrainNever {
			return lineageCovered, nil
		}
		return lineageChanged, nil
	case skipped == row:
		return lineageCovered, nil
	case untouched:
		return lineageFresh, skip
	}
	return lineageChanged, skip
}

// skipsOf is skips restricted to refs (nil when none has rows to skip).
func skipsOf(skips map[blockref.Ref][]RowRange, refs []blockref.Ref) map[blockref.Ref][]RowRange {
	var out map[blockref.Ref][]RowRange
	for _, r := range refs {
		if s, ok := skips[r]; ok {
			if out == nil {
				out = map[blockref.Ref][]RowRange{}
			}
			out[r] = append([]RowRange(nil), s...)
		}
	}
	return out
}

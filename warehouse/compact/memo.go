package compact

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// RowWise reports whether every op of graph g (a component's canonical
// graph) computes each row from that row alone, by reg's specs: then the
// component's values over a compacted block are its values over each part,
// one after the other, and its memo column can be concatenated
// (ConcatMember) instead of recomputed. An op reg does not know, or one
// marked transform.OpSpec.AcrossRows, makes it false: recomputing is
// always right. (No built-in op is across rows today.)
func RowWise(g *transform.Graph, reg *transform.Registry) bool {
	for _, n := range g.Nodes {
		spec, ok := reg.Op(n.Op)
		if !ok || spec.AcrossRows {
			return false
		}
	}
	return true
}

// PartColumn is one part's memo column of a component, as its memo entry
// names it: Block is the entry's memo block (the part's id at the input
// version the part's compacted version has for the component's columns),
// EventID the event ids of the object holding it (a pack's event_id
// column, or a memo object's of one component written before packs), and
// Value the column read from it (block.ReadColumns: widened to its
// declared type when it is stored narrow).
type PartColumn struct {
	Block   blockref.Memo
	EventID arrow.Array
	Value   arrow.Array
}

// ConcatMember is component k's pack member over compacted block c (its
// version 1), made from its memo columns over c's parts without
// recomputing: parts holds one column of each of c's parts, in c's order
// (c.Parts), and eventID is c's event_id column, whose rows are the
// parts' event ids one after the other (Concat). The member's values are
// the parts' one after the other, for memo block c at input version 1
// (version 1 of a block is its every column's first version), to be
// written with block.WritePacks over c as a worker writes what it computes
// (stored narrow unless PackOptions.Wide): then each member's segment and
// its footer entry are byte for byte a worker's over c
// (TestConcatMemoEqualsRecomputation). The caller checks that the
// component is RowWise, writes the pack whole and only then names it in
// the entries. Every part's column must be of the part and the version c
// names, have its rows, and be row-aligned with c's rows: its event ids
// are c's at its rows. The caller releases the member's Value.
func ConcatMember(c block.Meta, eventID arrow.Array, k canon.Key, parts []PartColumn) (block.PackMember, error) {
	if err := checkCompacted(c, eventID); err != nil {
		return block.PackMember{}, err
	}
	if len(parts) != len(c.Parts) {
		return block.PackMember{}, fmt.Errorf("compact: component %s: %d part columns for the %d parts of %s", k.Short(), len(parts), len(c.Parts), c.ID)
	}
	pieces := make([]arrow.Array, len(parts))
	var off int64
	for i, p := range parts {
		want := c.Parts[i]
		switch {
		case p.Block.ID() != want.ID || p.Block.InputVersion() < 1 || p.Block.InputVersion() > want.Ref().Version():
			return block.PackMember{}, fmt.Errorf("compact: component %s: the column of memo block %s is not of part %s of %s",
				k.Short(), p.Block, want.Ref(), c.ID)
		case p.Value == nil || p.EventID == nil || int64(p.Value.Len()) != want.Rows || int64(p.EventID.Len()) != want.Rows:
			return block.PackMember{}, fmt.Errorf("compact: component %s: the column of part %s does not have its %d rows", k.Short(), want.ID, want.Rows)
		case off+want.Rows > int64(eventID.Len()):
			return block.PackMember{}, fmt.Errorf("compact: %s has %d rows, fewer than its parts", c.ID, eventID.Len())
		}
		ids := array.NewSlice(eventID, off, off+want.Rows)
		aligned := array.Equal(ids, p.EventID)
		ids.Release()
		if !aligned {
			return block.PackMember{}, fmt.Errorf("compact: component %s: the event ids of part %s are not %s's at rows %d to %d",
				k.Short(), want.ID, c.ID, off, off+want.Rows)
		}
		if i > 0 && !arrow.TypeEqual(p.Value.DataType(), pieces[0].DataType()) {
			return block.PackMember{}, fmt.Errorf("compact: component %s: part %s's column is %s, part %s's %s",
				k.Short(), want.ID, p.Value.DataType(), c.Parts[0].ID, pieces[0].DataType())
		}
		pieces[i] = p.Value
		off += want.Rows
	}
	if off != int64(eventID.Len()) {
		return block.PackMember{}, fmt.Errorf("compact: %s has %d rows, its parts %d", c.ID, eventID.Len(), off)
	}
	v, err := array.Concatenate(pieces, memory.DefaultAllocator)
	if err != nil {
		return block.PackMember{}, fmt.Errorf("compact: component %s: %w", k.Short(), err)
	}
	return block.PackMember{Component: k, Block: c.Ref().Memo(1), Value: v}, nil
}

// checkCompacted checks that c is a compacted block at version 1 and
// eventID its event ids.
func checkCompacted(c block.Meta, eventID arrow.Array) error {
	switch {
	case len(c.Parts) == 0:
		return fmt.Errorf("compact: block %s is not compacted", c.ID)
	case c.Ref().Version() != 1:
		return fmt.Errorf("compact: block %s is at version %d: only version 1 holds its parts' rows", c.ID, c.Ref().Version())
	case eventID == nil || eventID.DataType().ID() != arrow.INT64 || int64(eventID.Len()) != c.Rows:
		return fmt.Errorf("compact: the event ids given are not %s's %d", c.ID, c.Rows)
	}
	return nil
}

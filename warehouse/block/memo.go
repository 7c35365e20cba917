package block

import (
	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// CheckMemo checks from its footer that a memo object is what its reader
// takes it for: block m of component k (the footer names both, m at its
// input version), holding event_id (int64) and MemoColumn of type typ,
// rows rows long, the rows of the raw block it is row-aligned with. The
// error is ErrCorrupt.
//
// Readers check every memo object they read with it (package reader), and
// sigd checks with it an object a reader reported (eviction's
// verification): one check, so that a footer a reader refuses is one sigd
// finds corrupt and recomputes, never one it calls healthy while every
// read of the block fails (issue 27). What the footer alone cannot show
// is checked where the segments are read: their checksums and decoding
// (FetchTail, FetchSegmentsInto, DecodeSegment, Decode) and that the event
// ids are the raw block's (SameSegment, or the ids compared).
func CheckMemo(meta Meta, k canon.Key, m blockref.Memo, typ string, rows int64) error {
	if meta.ComponentKey != k || meta.MemoRef() != m {
		return corrupt(meta.Key, "holds component %s of block %q input version %d, want component %s of block %q input version %d",
			meta.ComponentKey.Short(), meta.ID, meta.MemoRef().InputVersion(), k.Short(), m.ID(), m.InputVersion())
	}
	if len(meta.Columns) != 2 || meta.Columns[0].Name != transform.ColEventID || meta.Columns[1].Name != MemoColumn {
		names := make([]string, len(meta.Columns))
		for i, c := range meta.Columns {
			names[i] = c.Name
		}
		return corrupt(meta.Key, "columns %q, want [%s %s]", names, transform.ColEventID, MemoColumn)
	}
	if meta.Columns[0].Type != transform.Int64.String() {
		return corrupt(meta.Key, "event_id has type %s", meta.Columns[0].Type)
	}
	if meta.Columns[1].Type != typ {
		return corrupt(meta.Key, "value has type %s, want %s", meta.Columns[1].Type, typ)
	}
	if meta.Rows != rows {
		return corrupt(meta.Key, "%d rows, raw block has %d: not row-aligned", meta.Rows, rows)
	}
	return nil
}

// SameSegment reports whether two block objects hold byte-identical
// segments of column name, as far as their footers tell: the same length
// and CRC-32C. A memo object's event_id segment is its raw block's,
// written by the same encoder (workers/memo), so readers and sigd alike
// take equal segments as showing the two row-aligned without fetching the
// memo object's ids.
func SameSegment(a, b Meta, name string) bool {
	ca, oka := a.Column(name)
	cb, okb := b.Column(name)
	return oka && okb && ca.Length == cb.Length && ca.CRC32C == cb.CRC32C
}

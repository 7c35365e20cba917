package compact

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// RowWise reports whether every op of graph g (a component's canonical
// graph) computes each row from that row alone, by reg's specs: then the
// component's values over a compacted block are its values over each part,
// one after the other, and its memo data can be concatenated (ConcatMemo)
// instead of recomputed. An op reg does not know, or one marked
// transform.OpSpec.AcrossRows, makes it false: recomputing is always
// right. (No built-in op is across rows today.)
func RowWise(g *transform.Graph, reg *transform.Registry) bool {
	for _, n := range g.Nodes {
		spec, ok := reg.Op(n.Op)
		if !ok || spec.AcrossRows {
			return false
		}
	}
	return true
}

// MemoPart is one part's memo object of a component: its footer and its
// record (event_id and the value column), of the part at the version the
// compaction names.
type MemoPart struct {
	Meta   block.Meta
	Record arrow.Record
}

// ConcatMemo makes the memo object of compacted block c (its version 1)
// for the component of parts, one memo object of each of c's parts in
// c's order, without recomputing: its event ids and values are the parts'
// one after the other, as c's rows are. It returns the object's metadata
// and record, and the encoding options to write it with, the ones a worker
// would use (workers/memo writes a memo object's footer from its raw
// block's, and its event_id segment encoded as the raw block's, so that
// readers prove alignment from the footers); the caller checks the
// component is RowWise, writes the object whole (block.WriteWith) and only
// then makes the entry ready. The test TestConcatMemoEqualsRecomputation
// holds the result byte for byte to what a worker computes over c. The
// caller releases the record.
func ConcatMemo(c block.Meta, parts []MemoPart, valueCompression block.Compression) (block.Meta, arrow.Record, block.EncodeOptions, error) {
	var opts block.EncodeOptions
	if len(parts) != len(c.Parts) || len(parts) == 0 {
		return block.Meta{}, nil, opts, fmt.Errorf("compact: %d memo objects for the %d parts of %s", len(parts), len(c.Parts), c.ID)
	}
	if c.Ref().Version() != 1 {
		return block.Meta{}, nil, opts, fmt.Errorf("compact: block %s is at version %d: only version 1 holds its parts' rows", c.ID, c.Ref().Version())
	}
	first := parts[0].Meta
	recs := make([]arrow.Record, len(parts))
	for i, p := range parts {
		want := c.Parts[i]
		switch {
		case !p.Meta.IsMemo() || p.Meta.ComponentKey != first.ComponentKey:
			return block.Meta{}, nil, opts, fmt.Errorf("compact: memo object %s is not of component %s", p.Meta.Key, first.ComponentKey.Short())
		case p.Meta.ID != want.ID || p.Meta.Rows != want.Rows || p.Record.NumRows() != want.Rows:
			return block.Meta{}, nil, opts, fmt.Errorf("compact: memo object %s (block %s, %d rows) is not of part %s (%d rows) of %s",
				p.Meta.Key, p.Meta.ID, p.Meta.Rows, want.ID, want.Rows, c.ID)
		}
		recs[i] = p.Record
	}
	rec, err := Concat(recs)
	if err != nil {
		return block.Meta{}, nil, opts, err
	}
	// The footer a worker writes over c: the raw block's id, window, event
	// range, schema, lateness and generation, the component, input
	// version 1.
	m := block.Meta{Key: block.MemoKey(first.ComponentKey, blockref.NewMemo(c.ID, 1)), ID: c.ID, Source: c.Source,
		ComponentKey: first.ComponentKey, WindowStart: c.WindowStart, WindowLength: c.WindowLength,
		MinEventTime: c.MinEventTime, MaxEventTime: c.MaxEventTime, SchemaFingerprint: c.SchemaFingerprint,
		Late: c.Late, Generation: c.Generation}
	opts.Compression = valueCompression
	if col, ok := c.Column(transform.ColEventID); ok {
		opts.Columns = map[string]block.Compression{transform.ColEventID: col.Compression}
	}
	return m, rec, opts, nil
}

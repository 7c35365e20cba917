package compact

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Plan chooses which blocks of one partition and window to compact into
// blocks of about target bytes: runs of consecutive small blocks (doc.go,
// "Planning"). blocks are the window's blocks of one Kafka topic and
// partition, each at its newest version, in offset order (catalog ids sort
// so). Each run returned has two blocks or more; together their objects
// are at most target bytes, and the compacted block's object about their
// sum. It is a pure function of its arguments.
func Plan(blocks []block.Meta, target int64) [][]block.Meta {
	var (
		runs [][]block.Meta
		run  []block.Meta
		size int64
	)
	flush := func() {
		if len(run) >= 2 {
			runs = append(runs, run)
		}
		run, size = nil, 0
	}
	for _, m := range blocks {
		if !Small(m, target) {
			// A barrier: a run is contiguous in offset order, so that
			// the compacted block holds every record of its window in
			// the offsets between its first part's and its last's.
			flush()
			continue
		}
		if len(run) > 0 && (size+m.Size > target || m.SchemaFingerprint != run[0].SchemaFingerprint) {
			flush()
		}
		run = append(run, m)
		size += m.Size
	}
	flush()
	return runs
}

// Small reports whether m may be a part of a compaction into blocks of
// target bytes: a raw block ingestion cut (a Kafka range), not compacted
// already (a compacted block is never a part: doc.go, "Lineage"), not a
// tombstone, whose object is at most half of target (a larger one is left
// as it is: two of them would not fit one target).
func Small(m block.Meta, target int64) bool {
	return m.Kafka != nil && len(m.Parts) == 0 && !m.IsTombstone() && !m.IsMemo() && m.Key != "" && m.Size <= target/2
}

// Meta is the metadata of the block compacting parts makes, before its
// object is written (block.Write fills in columns, rows and placement):
// version 1 of a new block of the parts' source, window and partition,
// whose id is block.ID of its window and the Kafka range from its first
// part's first offset to its last part's last (a range no other block of
// the window has: Plan's runs are contiguous), and whose lineage (Parts)
// names each part at its version, with its rows and the Kafka spans it
// held. generation is the compacting process's (catalog.NextGeneration).
func Meta(parts []block.Meta, generation int64) (block.Meta, error) {
	if len(parts) < 2 {
		return block.Meta{}, fmt.Errorf("compact: %d parts, want 2 or more", len(parts))
	}
	first := parts[0]
	if first.Kafka == nil {
		return block.Meta{}, fmt.Errorf("compact: block %s has no Kafka range", first.ID)
	}
	kr := block.KafkaRange{Topic: first.Kafka.Topic, Partition: first.Kafka.Partition, First: first.Kafka.First, Last: first.Kafka.Last}
	var lineage []block.Part
	for _, p := range parts {
		switch {
		case p.Kafka == nil || p.Kafka.Topic != kr.Topic || p.Kafka.Partition != kr.Partition:
			return block.Meta{}, fmt.Errorf("compact: block %s is of another Kafka partition than %s", p.ID, first.ID)
		case p.Source != first.Source || p.WindowStart != first.WindowStart || p.WindowLength != first.WindowLength:
			return block.Meta{}, fmt.Errorf("compact: block %s is of another source or window than %s", p.ID, first.ID)
		case p.SchemaFingerprint != first.SchemaFingerprint:
			return block.Meta{}, fmt.Errorf("compact: block %s has another schema than %s", p.ID, first.ID)
		case len(p.Parts) > 0:
			return block.Meta{}, fmt.Errorf("compact: block %s is compacted already", p.ID)
		}
		kr.First, kr.Last = min(kr.First, p.Kafka.First), max(kr.Last, p.Kafka.Last)
		lineage = append(lineage, block.Part{ID: p.ID, Version: blockref.Stored(p.Ref().Version()), Rows: p.Rows, Spans: p.Spans()})
	}
	id := block.ID(first.WindowStart, kr)
	return block.Meta{Key: block.RawKey(first.Source, blockref.New(id, 1)), ID: id, Source: first.Source,
		WindowStart: first.WindowStart, WindowLength: first.WindowLength, SchemaFingerprint: first.SchemaFingerprint,
		Kafka: &kr, Generation: generation, Parts: lineage}, nil
}

// Concat is the record of a compacted block: recs (the parts' records, in
// the parts' order) one after the other, column by column. The records
// must have equal schemas. The caller releases the result.
func Concat(recs []arrow.Record) (arrow.Record, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("compact: nothing to concatenate")
	}
	sch := recs[0].Schema()
	var rows int64
	for i, r := range recs {
		if !r.Schema().Equal(sch) {
			return nil, fmt.Errorf("compact: record %d has schema %s, the first %s", i, r.Schema(), sch)
		}
		rows += r.NumRows()
	}
	cols := make([]arrow.Array, sch.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	pieces := make([]arrow.Array, len(recs))
	for c := range cols {
		for i, r := range recs {
			pieces[i] = r.Column(c)
		}
		a, err := array.Concatenate(pieces, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("compact: column %s: %w", sch.Field(c).Name, err)
		}
		cols[c] = a
	}
	rec := array.NewRecord(sch, cols, rows)
	return rec, nil
}

package catalog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/warehouse/block"
)

// Compaction (issue 28; doc.go, "Compaction"). A compacted block is a new
// block whose version 1 holds the rows of small blocks of one partition and
// window (its parts, block.Meta.Parts); committing it ends each part with a
// tombstone version in the same batch, so that a snapshot sees either the
// parts or the compacted block, never both and never neither.

// Compact catalogues compacted block m, whose object is written, and ends
// each of its parts with a tombstone version (block.Meta.CompactedInto: no
// rows, no object), in one durable Pebble batch. The Kafka coverage the
// parts held (their ranges and their changes' spans) moves to m, so
// ingestion skips their records as before and the catalog refuses them
// again (ErrOverlap), and nothing else changes.
//
// Every part must be catalogued at the version m names, with the rows it
// names (ErrConflict otherwise: a change committed after the compactor read
// the part would otherwise be lost), not be a tombstone, and belong to m's
// source, window and Kafka partition. m's id must be new.
//
// Superseded part versions stay readable at the snapshots before the
// commit (RangeAt, GetAt) until GC collects them, once no pin sees them;
// tombstones are their blocks' newest versions and are kept, so a
// snapshot's view of a part never changes.
//
// The tombstones take their sequence numbers before m does: a snapshot
// number taken between them (possible only by pinning a number by hand)
// lacks the rows rather than holding them twice.
func (c *Catalog) Compact(m block.Meta) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	switch {
	case len(m.Parts) < 2:
		return fmt.Errorf("catalog: compacted block %s names %d parts, want 2 or more", m.ID, len(m.Parts))
	case m.Ref().Version() != 1 || m.IsMemo() || m.IsTombstone() || m.Key == "" || m.Kafka == nil || m.WindowLength <= 0:
		return fmt.Errorf("catalog: compacted block %s: a raw block at version 1 with its key, window and Kafka range is required", m.ID)
	}
	var rows int64
	for _, p := range m.Parts {
		rows += p.Rows
	}
	if rows != m.Rows {
		return fmt.Errorf("catalog: compacted block %s has %d rows, its parts %d", m.ID, m.Rows, rows)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	info, err := c.Source(m.Source)
	if err != nil {
		return err
	}
	if info.WindowLength != m.WindowLength {
		return fmt.Errorf("catalog: block %s has window length %d, source %s uses %d: %w",
			m.ID, m.WindowLength, m.Source, info.WindowLength, ErrConflict)
	}
	if _, err := c.Get(m.Source, m.ID); err == nil {
		return fmt.Errorf("catalog: compacted block %s is catalogued already: %w", m.ID, ErrConflict)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	seq, err := c.seq()
	if err != nil {
		return err
	}
	b := c.db.NewBatch()
	defer b.Close()
	parts := map[string]bool{}
	for _, p := range m.Parts {
		if parts[p.ID] {
			return fmt.Errorf("catalog: compacted block %s names part %s twice", m.ID, p.ID)
		}
		parts[p.ID] = true
		cur, err := c.Get(m.Source, p.ID)
		if err != nil {
			return fmt.Errorf("catalog: part of compacted block %s: %w", m.ID, err)
		}
		switch {
		case cur.IsTombstone():
			return fmt.Errorf("catalog: part %s of %s was compacted into %s already: %w", p.ID, m.ID, cur.CompactedInto, ErrConflict)
		case cur.Ref() != p.Ref() || cur.Rows != p.Rows:
			return fmt.Errorf("catalog: part %s of %s is catalogued at version %d with %d rows, the compaction read version %d with %d: %w",
				p.ID, m.ID, cur.Ref().Version(), cur.Rows, p.Ref().Version(), p.Rows, ErrConflict)
		case cur.WindowStart != m.WindowStart || cur.Kafka == nil || cur.Kafka.Topic != m.Kafka.Topic || cur.Kafka.Partition != m.Kafka.Partition:
			return fmt.Errorf("catalog: part %s of %s is of another window or partition", p.ID, m.ID)
		}
		hv, _ := json.Marshal(cur)
		b.Set(historyKey(m.Source, p.ID, cur.Ref().Version()), hv, nil)
		seq++
		t := tombstone(cur, m.ID, seq)
		v, _ := json.Marshal(t)
		b.Set(blockKey(m.Source, p.ID), v, nil)
		if cur.Seq >= 1 {
			b.Delete(seqKey(cur.Seq), nil)
		}
		b.Set(seqKey(seq), seqRef(m.Source, p.ID), nil)
	}
	// The parts' coverage moves to m: the same spans, naming m.
	moved := 0
	it, err := c.db.NewIter(&pebble.IterOptions{
		LowerBound: offsetKey(m.Kafka.Topic, m.Kafka.Partition, m.WindowStart, 0),
		UpperBound: offsetKey(m.Kafka.Topic, m.Kafka.Partition, m.WindowStart+1, 0),
	})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		var e offsetEntry
		if err := json.Unmarshal(it.Value(), &e); err != nil {
			it.Close()
			return fmt.Errorf("catalog: offset index: %w", err)
		}
		if e.Source != m.Source || !parts[e.ID] {
			continue
		}
		e.ID = m.ID
		e.MaxEventTime = m.MaxEventTime
		v, _ := json.Marshal(e)
		b.Set(slices.Clone(it.Key()), v, nil)
		moved++
	}
	if err := it.Close(); err != nil {
		return err
	}
	if moved == 0 {
		return fmt.Errorf("catalog: compacted block %s: its parts cover no Kafka records", m.ID)
	}
	seq++
	m.Seq = seq
	v, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	b.Set(blockKey(m.Source, m.ID), v, nil)
	b.Set(seqKey(seq), seqRef(m.Source, m.ID), nil)
	b.Set(keySeq, binary.BigEndian.AppendUint64(nil, uint64(seq)), nil)
	b.Set(keyIndexed, binary.BigEndian.AppendUint64(nil, uint64(seq)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("catalog: compact %d blocks into %s: %w", len(m.Parts), m.ID, err)
	}
	return nil
}

// tombstone is the version of part cur that compaction into block into
// ends it with: no rows, no object, every column changed (so no memo entry
// of the part is read at it, and version GC drops them with the part's
// last version), catalogued at seq.
func tombstone(cur block.Meta, into string, seq int64) block.Meta {
	t := cur.Clone()
	t.Version = cur.Ref().Version() + 1
	t.Key, t.Rows, t.MinEventTime, t.MaxEventTime = "", 0, 0, 0
	t.Size, t.FooterOffset, t.FooterLength, t.Checksum = 0, 0, 0, 0
	t.ColumnVersions = map[string]int64{}
	for _, col := range cur.Columns {
		t.ColumnVersions[col.Name] = t.Version
	}
	t.Columns = nil
	t.CompactedInto = into
	t.Seq = seq
	return t
}

// Window returns the blocks of source whose window starts at windowStart,
// in id order (partition, then offset), each at its newest version: those
// without rows too (a version that deleted every row), tombstones not. The
// compactor plans from it.
func (c *Catalog) Window(source string, windowStart int64) ([]block.Meta, error) {
	p := block.WindowPrefix(windowStart)
	var out []block.Meta
	err := c.scan(source, p, p+"\xff", func(m block.Meta) bool {
		if m.WindowStart == windowStart && !m.IsTombstone() {
			out = append(out, m)
		}
		return true
	})
	return out, err
}
